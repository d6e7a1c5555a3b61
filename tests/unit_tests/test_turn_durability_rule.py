"""Which turns checkpoint once, at their end (`graph.durability.turn_durability`)."""

from __future__ import annotations

import pytest

from graph.background import LocalScheduler
from graph.durability import TURN_DURABILITY, turn_durability
from memory_graph_agent.settings import Settings

INLINE = Settings().override(memory_mode="inline")


def test_a_turn_whose_memory_forms_in_the_background_checkpoints_at_its_end():
    assert TURN_DURABILITY == "exit"
    assert turn_durability(Settings(), LocalScheduler()) == "exit"


@pytest.mark.parametrize(
    "settings, scheduler",
    [
        (Settings(), None),  # no scheduler: memory forms inline
        (INLINE, LocalScheduler()),
    ],
    ids=["no-scheduler", "inline-memory"],
)
def test_other_graphs_keep_langgraphs_default(settings, scheduler):
    assert turn_durability(settings, scheduler) is None
