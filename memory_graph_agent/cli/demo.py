"""The demo: a short conversation whose early facts outlive the working window.

Zhang San introduces themself, small-talks until that leaves the window, switches from Go to
Rust and ends the session; a new thread still knows them and the change, another user does not.
The window, the summary batch and the reflection threshold are shrunk so that all of it
happens within a dozen turns (a couple of minutes with the local CPU model).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from rich.markup import escape

from graph.context import Context
from graph.prompts import system_prompt
from memory_graph_agent.cli.console import ReplyPrinter, console
from memory_graph_agent.cli.doctor import print_results, run_checks
from memory_graph_agent.cli.session import end_session, open_agent, run_turn
from memory_graph_agent.core.kinds import MemoryKind
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.memories import Memory

INTRODUCTION = [
    "Hi! My name is Zhang San. I'm a VIP customer and I live in Berlin.",
    "For programming I prefer Go over Java.",
]
SMALL_TALK = [
    "What is a good name for a cat?",
    "How do tides work?",
    "Give me a tip for sleeping well.",
    "What is the capital of Canada?",
    "How many legs does a spider have?",
    "Suggest a healthy breakfast.",
    "Why is the sky blue?",
    "What is a haiku?",
    "Name a famous painter.",
    "How do I make tea?",
    "What is photosynthesis?",
    "Recommend a board game.",
    "How far is the Moon?",
    "What do bees eat?",
    "Tell me a fun fact about octopuses.",
    "What is a prime number?",
    "How do rainbows form?",
    "Suggest a name for a boat.",
    "What is jazz?",
    "How do I stay focused?",
    "What is the tallest mountain?",
    "How do plants drink water?",
    "What is a sonnet?",
    "Give me a stretching tip.",
    "What is a comet?",
    "How do birds migrate?",
    "What is origami?",
    "Name a classic novel.",
    "How does a compass work?",
    "What is the speed of sound?",
]
CHANGE = "Actually, for programming I now prefer Rust over Go."
RECALL_QUESTION = "Hi again! Do you remember my name, where I live and which language I prefer?"


SHOWN = ("summarize", "reflect:", "consolidate: profile", "notice:")
"""The per-turn memory events the demo prints."""
STORAGE_FAILURES = (
    "notice: PostgreSQL crashed",
    "consolidate: storage failed",
    "window: episodic log unavailable",
)


def _storage_failure(events: list[dict[str, Any]]) -> str | None:
    """Why memory cannot be stored right now (a crash or a failed write), or None."""
    for event in events:
        if event["text"].startswith(STORAGE_FAILURES):
            return event["text"]
    return None


async def _preflight(model: str) -> bool:
    """Before the turns, every part does its real work once (`memory-agent doctor`)."""
    return print_results(await run_checks(model or None))


def _block(prompt: str, tag: str) -> str:
    return prompt.split(f"\n<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


DEMO_SUMMARY_BATCH = 4
"""Pending messages per summary in the demo (default 5): two turns make a summary."""
DEMO_REFLECT_AFTER = 3
"""Summaries before a reflection in the demo (default 10)."""
PLAN = (
    "What this proves: Zhang San introduces themself (turns 1-2), small talk pushes that out "
    "of the {window}-message window into stored summaries, they switch Go → Rust, /new ends "
    "the session; then a new thread must still know them and the change, a reflection must "
    "exist, and another user must see nothing."
)


def _settings(window_size: int) -> Settings:
    """The demo's settings: a small window and batch, an early reflection."""
    return Settings.from_env().override(
        window_size=window_size,
        window_token_share=1.0,  # the window is its last `window_size` messages
        summary_batch=DEMO_SUMMARY_BATCH,
        reflect_after=DEMO_REFLECT_AFTER,
    )


@dataclass
class _IntroductionMarks:
    """Prints, once each, when the introduction leaves the window and lands in a summary."""

    left: bool = False
    landed: bool = False

    def update(self, window: list[Any], when: str, elapsed: float) -> None:
        """Note the turn after which the first introduction message is out of ``window``."""
        if self.left or any(m.content == INTRODUCTION[0] for m in window):
            return
        self.left = True
        console.print(
            f"[bold yellow]>> after {when} ({elapsed:.0f} s): the introduction left the "
            "window; the agent no longer sees it verbatim, it waits to be summarized[/]"
        )

    def find_summary(self, summaries: list[Memory], when: str, elapsed: float) -> None:
        """Note the first stored summary that holds Zhang San's name."""
        holder = next((m for m in summaries if "zhang san" in m.text.lower()), None)
        if holder is None:
            return
        self.landed = True
        console.print(
            f"[bold yellow]>> after {when} ({elapsed:.0f} s): the introduction now lives "
            f"in stored summary {holder.id[:8]}; recall can bring it back to any thread[/]"
        )


async def run_demo(turns: int = 6, window_size: int = 6) -> int:
    """Run the scripted conversation and print what memory did at every turn."""
    run = uuid.uuid4().hex[:6]
    settings = _settings(window_size)
    zhang, other = Context(user_id=f"zhang-san-{run}"), Context(user_id=f"li-si-{run}")
    thread = f"demo-{run}"
    console.rule("[bold]memory-graph-agent demo")
    console.print(
        f"user [bold]{zhang.user_id}[/], thread [bold]{thread}[/], model {zhang.model}, "
        f"window {settings.window.size} messages, "
        f"summary batch {settings.formation.summary_batch}, "
        f"reflection after {settings.formation.reflect_after} summaries"
    )
    console.print(PLAN.format(window=settings.window.size))
    if not await _preflight(zhang.model):
        console.print("[red]a part of memory does not work here, stopping the demo[/]")
        return 1
    script = INTRODUCTION + (SMALL_TALK * (turns // len(SMALL_TALK) + 1))[:turns]
    started = time.perf_counter()
    marks = _IntroductionMarks()
    async with open_agent(settings) as (agent, services, memory):
        for i, text in enumerate(script, 1):
            console.print(f"[bold]turn {i:>2}[/] you: {escape(text)}")
            printer = ReplyPrinter("        agent: ", limit=100)
            state = await run_turn(agent, zhang, thread, text, on_token=printer, settings=settings)
            printer.close(str(state["messages"][-1].content))
            window = await services.window.window(zhang.user_id, thread)
            counts = await services.memories.count(zhang.user_id)
            # this turn's events, then those of the background memory runs finished since
            all_events = state.get("memory_events", []) + [
                e for report in memory.reports() for e in report.get("memory_events", [])
            ]
            events = [e["text"] for e in all_events if e["text"].startswith(SHOWN)]
            console.print(
                f"        [cyan]memory:[/] window {len(window)}, "
                f"pending {state.get('pending_count', 0)}, "
                f"summaries {counts.get(MemoryKind.SUMMARY, 0)}, "
                f"reflections {counts.get(MemoryKind.REFLECTION, 0)}, "
                f"profile: {escape(', '.join(state.get('profile', {})) or '-')}, "
                f"recalled {len(state.get('recalled', []))}"
                + (f"\n        [cyan]events:[/] {escape('; '.join(events))}" if events else "")
            )
            marks.update(window, f"turn {i}", time.perf_counter() - started)
            if marks.left and not marks.landed:
                summaries = await services.memories.list(zhang.user_id, kind=MemoryKind.SUMMARY)
                marks.find_summary(summaries, f"turn {i}", time.perf_counter() - started)
            if problem := _storage_failure(all_events):
                console.print(
                    f"[red]memory cannot be stored, stopping the demo:[/] {escape(problem)}"
                )
                return 1
        console.print(f"[bold]turn {len(script) + 1:>2}[/] you: {escape(CHANGE)}")
        printer = ReplyPrinter("        agent: ", limit=100)
        state = await run_turn(agent, zhang, thread, CHANGE, on_token=printer, settings=settings)
        printer.close(str(state["messages"][-1].content))
        console.rule("[bold]/new: the session ends, the whole thread is archived")
        state = await end_session(agent, zhang, thread, memory)
        # the background memory runs that finished first (the reflection, usually), then /new's
        earlier = [e for report in memory.reports() for e in report.get("memory_events", [])]
        for event in earlier + state.get("memory_events", []):
            if event["node"] in ("summarize", "consolidate", "reflect", "trim_window"):
                console.print(f"        [cyan]{escape(event['text'])}[/]")
        first = await services.window.window(zhang.user_id, thread)
        if first:
            console.print(f"oldest message still in the window: {escape(first[0].content[:60])!r}")
        summaries = await services.memories.list(zhang.user_id, kind=MemoryKind.SUMMARY)
        if not marks.landed:  # memory ran late (a busy machine): /new archived it
            marks.find_summary(summaries, "/new", time.perf_counter() - started)
        holders = [m for m in summaries if "zhang san" in m.text.lower()]
        cited = ", ".join(
            f"{m.id[:8]} ({m.importance}, {len(m.source_ids)} sources)" for m in holders
        )
        console.print(f"the introduction now lives in {len(holders)} stored summary(ies): {cited}")

        console.rule("[bold]new thread, same user")
        printer = ReplyPrinter("[bold]agent:[/] ")
        state = await run_turn(
            agent,
            zhang,
            f"demo-{run}-new",
            RECALL_QUESTION,
            on_token=printer,
            settings=settings,
        )
        printer.close(str(state["messages"][-1].content))
        prompt = system_prompt(state, settings.window.profile_token_budget)
        profile, memories = _block(prompt, "profile"), _block(prompt, "memories")
        console.print(f"[bold]profile in prompt:[/]\n{escape(profile)}")
        changed = "preferred_language Go → Rust" in profile
        history = await services.profile.history(zhang.user_id, "preferred_language")
        for past in history:
            console.print(
                f"[bold]profile history:[/] preferred_language was {escape(past['value'])!r} "
                f"from {past['valid_from'][:19]} to {past['valid_to'][:19]} "
                f"({past.get('reason', '')}, sources "
                f"{', '.join(s[:8] for s in past['source_ids'])})"
            )
        reflections = await services.memories.list(zhang.user_id, kind=MemoryKind.REFLECTION)
        for r in reflections:
            console.print(
                f"[bold]reflection[/] {r.id[:8]} (cites {len(r.source_ids)} summaries): "
                f"{escape(r.text[:300])}"
            )
        console.print(f"[bold]recalled memories in prompt:[/]\n{escape(memories[:900])}")
        knows = "zhang san" in (profile + memories).lower()

        console.rule("[bold]another user asks the same")
        state = await run_turn(
            agent, other, f"demo-{run}-other", RECALL_QUESTION, settings=settings
        )
        prompt = system_prompt(state, settings.window.profile_token_budget)
        profile, memories = _block(prompt, "profile"), _block(prompt, "memories")
        console.print(f"[bold]profile in prompt:[/] {escape(profile)}")
        console.print(f"[bold]recalled memories in prompt:[/] {escape(memories)}")
        leaks = "zhang san" in (profile + memories).lower()

    console.rule("[bold]result")
    console.print(
        f"new thread of {zhang.user_id} has Zhang San's identity in its prompt: "
        f"[bold]{'YES' if knows else 'NO'}[/]"
    )
    console.print(
        "the new thread's profile notes the change Go → Rust: "
        f"[bold]{'YES' if changed else 'NO'}[/]"
    )
    console.print(f"reflections written: [bold]{len(reflections)}[/]")
    console.print(f"{other.user_id} sees Zhang San's memory: [bold]{'YES' if leaks else 'NO'}[/]")
    console.print(
        f"{len(script) + 3} turns in {time.perf_counter() - started:.0f} s. "
        f"Inspect with: memory-agent memory show --user {zhang.user_id}"
    )
    return 0 if knows and changed and reflections and not leaks else 1
