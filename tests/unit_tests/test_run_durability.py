"""Which runs checkpoint once, at their end (`graph.durability.run_durability`)."""

from __future__ import annotations

import pytest

from graph.context import Context
from graph.durability import TURN_DURABILITY, run_durability


def test_a_turn_whose_memory_forms_in_the_background_checkpoints_at_its_end():
    assert TURN_DURABILITY == "exit"
    assert run_durability(Context(user_id="u1"), background=True) == "exit"
    assert run_durability({"user_id": "u1"}, background=True) == "exit"  # the server's dict
    assert run_durability(None, background=True) == "exit"  # the defaults


@pytest.mark.parametrize(
    "context, background",
    [
        ({"user_id": "u1"}, False),  # no scheduler: memory forms inline, in the turn
        ({"user_id": "u1", "memory_mode": "inline"}, True),
        ({"user_id": "u1", "memory_of": "t1"}, True),  # a memory run
        ({"user_id": "no spaces allowed"}, True),  # refused by the graph, in its own words
        ({"no_such_knob": 1}, True),
    ],
    ids=["no-scheduler", "inline-memory", "memory-run", "bad-user", "unknown-knob"],
)
def test_other_runs_keep_langgraphs_default(context, background):
    assert run_durability(context, background) is None
