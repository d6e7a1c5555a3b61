"""Degraded-mode helpers: one warning per outage, a bounded buffer."""

import logging

from memory_graph_agent.storage.failsafe import WindowBuffer
from memory_graph_agent.storage.outages import Outages
from memory_graph_agent.storage.window import StoredMessage


def _msg(i: int) -> StoredMessage:
    return StoredMessage(id=f"m{i}", role="human", content=f"text {i}", ts="2026-01-01T00:00:00")


def test_an_outage_is_logged_once_and_its_end_once(caplog):
    outages = Outages()
    with caplog.at_level(logging.WARNING, logger="memory_graph_agent.storage.outages"):
        for _ in range(50):
            outages.failed("redis", ConnectionError("refused"))
        assert outages.is_down("redis")
        outages.ok("redis")
        outages.ok("redis")
    lines = [r.getMessage() for r in caplog.records]
    assert sum("redis unavailable" in line for line in lines) == 1
    assert sum("redis is back" in line for line in lines) == 1
    assert not outages.is_down("redis")


def test_buffer_keeps_order_dedupes_and_hands_back_per_thread():
    buf = WindowBuffer()
    buf.add("u", "t", [_msg(1), _msg(2)])
    buf.add("u", "t", [_msg(2), _msg(3)])  # m2 again: kept once
    buf.add("u", "other", [_msg(9)])
    assert [m.id for m in buf.take("u", "t")] == ["m1", "m2", "m3"]
    assert buf.take("u", "t") == [] and len(buf) == 1
    assert buf.drop_user("u") == 1 and len(buf) == 0


def test_buffer_is_bounded_and_drops_the_oldest(caplog):
    buf = WindowBuffer(max_messages=3)
    with caplog.at_level(logging.ERROR, logger="memory_graph_agent.storage.outages"):
        dropped = buf.add("u", "t", [_msg(i) for i in range(5)])
    assert dropped == 2 and len(buf) == 3
    assert [m.id for m in buf.take("u", "t")] == ["m2", "m3", "m4"]
    assert any("dropped" in r.getMessage() for r in caplog.records)
