"""A user's dense turn search reads and sorts the user's own turns up to `EXACT_TURNS`, and
walks the HNSW graph beyond (real Postgres, real MiniLM): one branch runs, never both."""

from __future__ import annotations

from memory_graph_agent.storage import nearest_turns
from tests.builders import log_turns

TURNS = [
    "We hiked up to the glacier lake on Saturday.",
    "The lake was freezing but the view was worth it.",
    "My sister is learning the cello this winter.",
    "She practices scales every evening after dinner.",
    "I switched my commute to the night train.",
    "The night train has a quiet carriage for reading.",
]


async def _plan(services, user: str, vector: list[float]) -> tuple[list[str], list[str]]:
    """(the message ids found, the plan's lines) of the dense search."""
    *options, (sql, params) = services.episodes.dense_statements(user, vector, 3)
    rows = await services.db.run(*options, (sql, params))
    plan = await services.db.run(*options, ("EXPLAIN (ANALYZE, COSTS OFF) " + sql, params))
    return [r["message_id"] for r in rows], [next(iter(r.values())) for r in plan]


def _graph_ran(plan: list[str]) -> bool:
    """Whether the branch for many turns (``n > :exact``, the HNSW order) ran, not the sort."""
    ran = {}
    for i, line in enumerate(plan):
        if "One-Time Filter" in line:
            scan = next(x for x in plan[i + 1 :] if "->" in x)
            ran[" > " in line] = "never executed" not in scan
    assert ran[True] != ran[False], plan  # exactly one branch ran
    return ran[True]


async def test_a_user_with_few_turns_is_sorted_exactly_and_many_walk_the_graph(
    services, user_id, monkeypatch
):
    ids = await log_turns(services, user_id, "t1", *TURNS)
    vector = await services.embeddings.aembed_query("What instrument is my sister learning?")

    exact, plan = await _plan(services, user_id, vector)
    assert not _graph_ran(plan)
    assert exact[0] == ids[2]

    monkeypatch.setattr(nearest_turns, "EXACT_TURNS", len(TURNS) - 1)
    walked, plan = await _plan(services, user_id, vector)
    assert _graph_ran(plan)
    assert walked == exact  # six turns: the graph finds the same nearest ones


async def test_the_dense_search_starts_no_parallel_workers(services, user_id):
    """The branch that does not run must cost nothing: a parallel sort's workers start
    before its one-time filter is read (10 ms of 13 with 40,000 turns, `bench.peers`)."""
    await log_turns(services, user_id, "t1", *TURNS)
    vector = await services.embeddings.aembed_query("What instrument is my sister learning?")
    *options, (sql, params) = services.episodes.dense_statements(user_id, vector, 3)
    eager = [f"SET LOCAL {s} = 0" for s in ("parallel_setup_cost", "parallel_tuple_cost",
                                            "min_parallel_table_scan_size")]  # fmt: skip
    plan = await services.db.run(*eager, *options, ("EXPLAIN (COSTS OFF) " + sql, params))
    assert not [r for r in plan if "Gather" in next(iter(r.values()))], plan
