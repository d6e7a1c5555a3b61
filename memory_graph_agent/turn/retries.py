"""The crash-loop breaker: a server task that ended its process twice is not run a third time.

``langgraph dev`` and the LangGraph server retry a run left running by a process that died,
under the same run id, and LangGraph resumes it at the step that was running. If that step
killed the process (a model that segfaults on this input), every restart dies the same way.
Each node start of a server run is counted in Redis, outside the process, by run id, step
and node; a third start of one fails cleanly, which the server does not retry.
"""

from __future__ import annotations

from memory_graph_agent.services.stores import Services
from memory_graph_agent.storage.outages import StoreUnavailable
from memory_graph_agent.turn.validation import check_id

MAX_TASK_STARTS = 2
"""Starts of one step of a run: the first, and one retry after its process died."""


class RepeatedCrashError(RuntimeError):
    """A step of a server run is started again although it ended its process twice."""


async def check_task_start(services: Services, run_id: str, step: int, node: str) -> None:
    """Count a start of ``node`` at ``step`` of run ``run_id``; refuse the third.

    Memory work is idempotent (pushes once per id, summaries under deterministic ids,
    acknowledgements per batch, one decision per item), so the one retry stores nothing
    twice. Without Redis nothing can be counted and the step runs.
    """
    task = f"{int(step)}.{check_id(node, 'node')}"
    try:
        starts = await services.runs.start(check_id(run_id, "run_id"), task)
    except StoreUnavailable:
        return
    if starts > MAX_TASK_STARTS:
        raise RepeatedCrashError(
            f"run {run_id}: step {step} ({node}) was started {starts} times and never "
            "finished (its process died, e.g. a model crash): not retried again. The "
            "thread's memory is intact; send the message again in a new run"
        )
