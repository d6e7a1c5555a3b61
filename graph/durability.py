"""How often a run writes its checkpoint: a turn that hands memory to the background, once.

LangGraph's default durability, ``"async"``, writes a checkpoint after every step, beside
the next one. A turn whose memory forms in a background run (``memory_mode=
"background"`` on a graph with a scheduler) is a few short steps around one model call:
load_profile ∥ recall → respond → trim_window. ``"exit"`` writes its checkpoint once,
when the run ends (with or without an error); that takes ~3.5 ms of a 2-core machine's
CPU off the read path (`bench.graph_floor`, docs/benchmarks.md).

What ``"exit"`` gives up is the checkpoint of each step: a process that dies mid-turn
leaves the thread's checkpoint as the previous turn left it (not even the new message).
Outside the LangGraph server nothing resumes a crashed turn anyway; the caller sends the
message again and the turn runs from its start. The turn's writes to Redis and Postgres
bear such a re-run, as they must for a step re-run after a crash: messages go by id
through seen-sets, batches by lease, facts by key (only access counts may count twice).

Who runs turns so: the CLI (`memory_graph_agent.cli.session.run_turn` with the agent's
scheduler). Memory runs, session ends and inline memory (model calls after the reply,
worth resuming) keep ``"async"``; so does every run the LangGraph server starts (it
passes its own durability, ``"async"`` unless the run asks otherwise). Nor does a turn
whose scheduler call fails form memory in its own run: the work waits in the pending
list for the next memory run (`memory_graph_agent.turn.closing.finish_turn`).
"""

from __future__ import annotations

from langgraph.types import Durability

from graph.context import Context, MemoryScheduler
from memory_graph_agent.settings import Settings

TURN_DURABILITY: Durability = "exit"
"""The durability of a turn whose memory forms in the background."""


def turn_durability(
    settings: Settings, context: Context, scheduler: MemoryScheduler | None
) -> Durability | None:
    """``TURN_DURABILITY`` for a turn that ends at trim_window, else ``None`` (LangGraph's).

    ``scheduler``: the memory scheduler the graph was built with (``None``: memory forms
    inline, in the turn's run). A memory run (``memory_of``) or inline memory gets
    ``None``: LangGraph's default, ``"async"``.
    """
    if scheduler is None or context.memory_of or settings.formation.mode != "background":
        return None
    return TURN_DURABILITY
