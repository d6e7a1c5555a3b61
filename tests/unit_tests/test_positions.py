"""`recall.positions.pointed`: what a question names of the conversation, and what not."""

from __future__ import annotations

import pytest

from memory_graph_agent.recall.positions import MAX_POSITION, Pointer, pointed


@pytest.mark.parametrize(
    ("question", "pointer"),
    [
        ("What did I ask first in this conversation?", Pointer(from_start=(1,))),
        ("what did i ask you first?", Pointer(from_start=(1,))),
        ("What was the second thing I asked you today?", Pointer(from_start=(2,))),
        ("Go back to my third question.", Pointer(from_start=(3,))),
        ("What was the 4th question I asked?", Pointer(from_start=(4,))),
        ("Your first answer said what, exactly?", Pointer(from_start=(1,))),
        ("What did we say at the start of this conversation?", Pointer(from_start=(1,))),
        (
            "What was the second option you gave in your answer to my fourth question?",
            Pointer(from_start=(4,)),
        ),
        ("What did you tell me 3 questions ago?", Pointer(back=(3,))),
        ("Tell me more about the thing I asked two questions ago", Pointer(back=(2,))),
        ("Can you repeat your previous answer?", Pointer(back=(1,))),
        ("Expand on what you said a couple of messages back.", Pointer(back=(2,))),
        ("Compare my first question with the one five questions ago", Pointer((1,), (5,))),
        ("Can you recap everything we talked about in this conversation?", Pointer(every=True)),
        ("Summarize what we discussed so far", Pointer(every=True)),
        ("Give me a recap of our chat.", Pointer(every=True)),
    ],
)
def test_a_question_that_points_into_the_conversation(question: str, pointer: Pointer) -> None:
    assert pointed(question) == pointer


@pytest.mark.parametrize(
    "question",
    [
        "When did Caroline first go to the LGBTQ support group?",
        "What was the first issue I had with my new car after its first service?",
        "What was the first thing I bought for the new flat?",
        "How many questions did I ask about taxes last month?",
        "Where do I live now, and what food must I avoid?",
        "Summarize the plot of Dune.",
        "What did I tell you about my sister's wedding?",
        "",
    ],
)
def test_a_question_about_something_else_points_at_nothing(question: str) -> None:
    assert not pointed(question)


def test_a_place_beyond_any_conversation_is_dropped() -> None:
    assert not pointed(f"What was my {MAX_POSITION + 1}st question?")
    assert not pointed("What did you say 0 questions ago?")
    farthest = pointed(f"What did you say {MAX_POSITION} questions ago?")
    assert farthest == Pointer(back=(MAX_POSITION,))


def test_a_long_message_is_read_at_its_ends_only() -> None:
    filler = "Recap all of it as we go. " * 4000  # 104,000 characters, no place named
    assert pointed(filler + "What did I ask first?") == Pointer(from_start=(1,))
    assert not pointed("What did I ask " + filler + " first")
