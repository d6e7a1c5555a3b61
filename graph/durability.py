"""How often a run writes its checkpoint: a turn that hands memory to the background, once.

LangGraph's default durability, ``"async"``, writes a checkpoint after every step, beside
the next one. A turn whose memory forms in a background run (``memory_mode=
"background"`` on a graph with a scheduler) is four short steps around one model call:
load_profile ∥ recall → respond → trim_window. Its step checkpoints cost the read path
~3.5 ms of a 2-core machine's CPU (`bench.graph_floor`, README "Performance"), and a
run that fails still saves what it did (``"exit"`` writes when the run ends, with or
without an error). What ``"exit"`` gives up is resuming a crashed process mid-turn:
the turn runs again from its start (the server re-runs an unfinished run) instead of from
its last step. Its writes to Redis and Postgres already bear a re-run, as they must for a
step re-run after a crash: messages go by id through seen-sets, batches by lease, facts
by key (only access counts may count twice).

So `run_durability` gives such a turn ``"exit"``; memory runs, inline memory (model
calls after the reply, worth resuming) and every run whose caller chose a durability
(the LangGraph server always does: ``"async"`` unless the run asks otherwise) keep
theirs.
"""

from __future__ import annotations

from typing import Any

from graph.context import Context

TURN_DURABILITY = "exit"
"""The durability of a turn whose memory forms in the background."""


def run_durability(context: Any, background: bool) -> str | None:
    """``TURN_DURABILITY`` for a turn that ends at trim_window, else ``None`` (LangGraph's).

    ``background``: the graph has a memory scheduler. Never raises: a context the graph
    refuses (it says why, in its own error) gets ``None``.
    """
    if not background:
        return None
    try:
        ctx = context if isinstance(context, Context) else Context(**(context or {}))
    except Exception:  # noqa: BLE001 - the run reports bad context, not this
        return None
    if ctx.memory_of or ctx.memory_mode != "background":
        return None
    return TURN_DURABILITY
