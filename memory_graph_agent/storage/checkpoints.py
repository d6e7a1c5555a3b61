"""Checkpoint retention through LangGraph's public checkpointer API (CLI, notebooks, tests).

Each turn saves a few checkpoints, and a thread keeps them all: after the 6,000-turn soak
they were the largest thing in Postgres. `SaverCheckpoints` prunes threads to their
latest checkpoint with ``aprune(strategy="keep_latest")`` (langgraph-checkpoint-postgres
>= 3.2): the latest checkpoint of each namespace stays with its pending writes and the
blobs it references, in one transaction per thread on one snapshot, so a run appending to
the thread meanwhile loses nothing. A thread whose latest checkpoint still has pending
writes (a step under way, interrupted or crashed) is held whole, not pruned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from langgraph.checkpoint.base import BaseCheckpointSaver

Verdict = Literal["prune", "in_flight"]


class SaverCheckpoints:
    """Prune the threads of a LangGraph checkpointer (`BaseCheckpointSaver`) to their latest."""

    def __init__(self, saver: BaseCheckpointSaver) -> None:
        self.saver = saver

    async def survey(self, thread_ids: Sequence[str]) -> dict[str, Verdict]:
        """For each thread with more than its latest checkpoint: prune it, or hold it."""
        verdicts: dict[str, Verdict] = {}
        for thread_id in thread_ids:
            config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
            latest = [t async for t in self.saver.alist(config, limit=2)]
            if len(latest) < 2:
                continue  # nothing older than the latest to remove
            verdicts[thread_id] = "in_flight" if latest[0].pending_writes else "prune"
        return verdicts

    async def prune(self, thread_ids: Sequence[str]) -> None:
        """Keep only the latest checkpoint (with its pending writes) of each thread."""
        if thread_ids:
            await self.saver.aprune(list(thread_ids), strategy="keep_latest")
