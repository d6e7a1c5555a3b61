"""The soak's maintenance passes: a failed pass is counted by the store it could not reach."""

from __future__ import annotations

import psycopg
import redis

from bench.soak_report import COUNTS, Maintainer, failure_cause
from memory_graph_agent.storage.outages import StoreUnavailable


def _from(exc: BaseException, cause: BaseException) -> BaseException:
    exc.__cause__ = cause  # what ``raise exc from cause`` leaves
    return exc


def test_a_pass_failure_is_named_by_the_store_that_was_down() -> None:
    down = redis.ConnectionError("Error 111 connecting")
    assert failure_cause(_from(StoreUnavailable("redis", down), down)) == "redis"
    assert failure_cause(_from(RuntimeError("a step failed"), down)) == "redis"
    stopped = psycopg.OperationalError("connection refused")
    assert failure_cause(_from(StoreUnavailable("postgres", stopped), stopped)) == "postgres"
    assert failure_cause(stopped) == "postgres"
    assert failure_cause(TimeoutError()) == "timeout"
    assert failure_cause(KeyError("report")) == "KeyError"


def test_totals_add_up_completed_passes_and_count_failures_by_cause() -> None:
    upkeep = Maintainer.__new__(Maintainer)  # no graph: only the bookkeeping is under test
    modes = {"retention": "keep_latest", "idle_threads": "off", "decision_retention": "off"}
    zero = dict.fromkeys(COUNTS, 0) | modes | {"pruned_by_kind": {}, "held_by_reason": {}}
    why = "memory: memory work pending"
    upkeep.passes = [
        {**zero, "ok": True, "seconds": 1.5, "checkpoints_pruned": 3, "checkpoints_held": 1,
         "pruned_by_kind": {"conversation": 2, "memory": 1}, "held_by_reason": {why: 1}},
        {"ok": False, "seconds": 0.2, "cause": "redis"},
        {**zero, "ok": True, "seconds": 0.5, "checkpoints_pruned": 2, "compacted": 4,
         "pruned_by_kind": {"conversation": 2}},
        {"ok": False, "seconds": 0.1, "cause": "redis"},
    ]  # fmt: skip
    t = upkeep.totals()
    assert (t["passes"], t["completed"], t["failed_by_cause"]) == (4, 2, {"redis": 2})
    assert (t["checkpoints_pruned"], t["checkpoints_held"], t["compacted"]) == (5, 1, 4)
    assert t["pruned_by_kind"] == {"conversation": 4, "memory": 1}
    assert t["held_by_reason"] == {why: 1}
    assert t["modes"]["retention"] == ["keep_latest"] and t["pass_seconds_max"] == 1.5
