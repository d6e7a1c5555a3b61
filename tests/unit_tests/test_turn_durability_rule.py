"""Which turns checkpoint once, at their end (`graph.durability.turn_durability`)."""

from __future__ import annotations

import pytest

from graph.background import LocalScheduler
from graph.context import Context
from graph.durability import TURN_DURABILITY, turn_durability
from memory_graph_agent.settings import Settings

INLINE = Settings().override(memory_mode="inline")


def test_a_turn_whose_memory_forms_in_the_background_checkpoints_at_its_end():
    assert TURN_DURABILITY == "exit"
    assert turn_durability(Settings(), Context(user_id="u1"), LocalScheduler()) == "exit"


@pytest.mark.parametrize(
    "settings, context, scheduler",
    [
        (Settings(), Context(user_id="u1"), None),  # no scheduler: memory forms inline
        (INLINE, Context(user_id="u1"), LocalScheduler()),
        (Settings(), Context(user_id="u1", memory_of="t1"), LocalScheduler()),  # a memory run
    ],
    ids=["no-scheduler", "inline-memory", "memory-run"],
)
def test_other_runs_keep_langgraphs_default(settings, context, scheduler):
    assert turn_durability(settings, context, scheduler) is None
