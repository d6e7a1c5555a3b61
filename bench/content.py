"""Generated text of the benchmarks: memories that read like this project's, and questions.

`memory_text` writes a 40-70 word summary or reflection about two of `TOPICS`;
`user_question` asks about one of them, so recall finds hits among the seeded memories.
"""

from __future__ import annotations

import random

TOPICS = [
    "sourdough baking", "marathon training", "the Rust borrow checker", "Kubernetes upgrades",
    "tomato gardening", "jazz piano voicings", "a trip to Lisbon", "learning Japanese",
    "tax returns", "a kitchen renovation", "cycling in the Alps", "home espresso",
    "a Postgres migration", "birdwatching", "a wedding speech", "chess endgames",
    "sleep schedules", "a job interview at a bank", "climbing grades", "cat allergies",
    "budget spreadsheets", "the history of Rome", "electric cars", "watercolor painting",
    "a broken laptop hinge", "vegan recipes", "photography lenses", "a podcast launch",
    "a noisy neighbour", "retirement savings", "Go generics", "a hiking trip in Norway",
    "board game nights", "knee physiotherapy", "a React performance bug", "wine pairing",
    "a flat in Berlin", "guitar strings", "meditation", "a sister's birthday present",
    "fantasy football", "solar panels", "a dentist appointment", "bread flour types",
    "TypeScript types", "a lost passport", "sea kayaking", "a book club pick",
    "mechanical keyboards", "a dog's diet", "startup fundraising", "the French subjunctive",
    "winter tyres", "a conference talk", "house plants", "an allergy to peanuts",
    "Python packaging", "a moving checklist", "an insurance claim", "a piano recital",
]  # fmt: skip
_ACTS = [
    "asked for help with", "complained about", "is excited about", "wants advice on",
    "has been reading about", "spent the weekend on", "is worried about", "made progress on",
    "compared options for", "shared a plan for", "is budgeting for", "changed their mind about",
]  # fmt: skip
_WHEN = [
    "last week", "this morning", "over the holidays", "since January", "for two months",
    "yesterday", "every Sunday", "after work", "before the deadline", "this spring",
]  # fmt: skip
_DETAILS = [
    "They prefer simple, step-by-step instructions.",
    "They mentioned a budget of about 500 euros.",
    "They said the deadline is at the end of the month.",
    "They would like reminders on weekday mornings.",
    "They found the previous suggestion too complicated.",
    "They want to compare at least three alternatives.",
    "They asked to keep answers short and concrete.",
    "They noted that their partner disagrees.", "They plan to try again next weekend.",
    "They mentioned working from home on Fridays.",
]  # fmt: skip
_QUESTIONS = [
    "What did I tell you about {t}?", "Can you remind me of my plan for {t}?",
    "Any new ideas on {t} given what you know about me?",
    "I am back with more questions on {t}.", "Summarize what we discussed about {t}, please.",
    "Do you remember my budget for {t}?", "What would you suggest next for {t}?",
]  # fmt: skip


def memory_text(rng: random.Random, kind: str = "summary") -> str:
    """A 40-70 word memory that reads like this project's summaries/reflections."""
    a, b = rng.sample(TOPICS, 2)
    if kind == "reflection":
        return (
            f"Across many conversations the user {rng.choice(_ACTS)} {a} and {b}. "
            f"{rng.choice(_DETAILS)} {rng.choice(_DETAILS)} They tend to return to {a} "
            f"{rng.choice(_WHEN)} and value concrete, practical suggestions."
        )
    return (
        f"The user {rng.choice(_ACTS)} {a} {rng.choice(_WHEN)}. {rng.choice(_DETAILS)} "
        f"Later they {rng.choice(_ACTS)} {b} {rng.choice(_WHEN)}. {rng.choice(_DETAILS)} "
        f"The assistant suggested breaking {a} into small weekly steps."
    )


def user_question(rng: random.Random) -> str:
    """A user turn that relates to the generated memories (so recall finds hits)."""
    return rng.choice(_QUESTIONS).format(t=rng.choice(TOPICS))
