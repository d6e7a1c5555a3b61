"""The checkpointer pool's reconnect window fits inside a turn's deadline."""

from __future__ import annotations

import math

import pytest

from memory_graph_agent.storage.postgres import PostgresTimeouts


@pytest.mark.parametrize(
    "timeouts",
    [PostgresTimeouts(), PostgresTimeouts(connect_s=1, statement_s=2), PostgresTimeouts(0.5, 1)],
    ids=["defaults", "the-outage-tests", "shortest"],
)
def test_the_last_reconnect_attempt_ends_before_a_waiting_turns_deadline(timeouts):
    connect = max(1, math.ceil(timeouts.connect_s))  # libpq's connect_timeout
    assert timeouts.connect_args()["connect_timeout"] == connect
    assert 0 < timeouts.reconnect_s
    assert timeouts.reconnect_s + connect < timeouts.deadline_s
