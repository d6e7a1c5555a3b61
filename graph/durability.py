"""How often a run writes its checkpoint: a turn that hands memory to the background, once.

LangGraph's default durability, ``"async"``, writes a checkpoint after every step, beside
the next one. A turn whose memory forms in a background run (``memory_mode=
"background"`` on a graph with a scheduler) is a few short steps around one model call:
load_profile ∥ recall → respond → trim_window. ``"exit"`` writes its checkpoint once,
when the run ends (with or without an error); that takes ~3.5 ms of a 2-core machine's
CPU off the read path (measured by the retired `bench.graph_floor`, CHANGELOG.md).

What ``"exit"`` gives up is the checkpoint of each step: a process that dies mid-turn
leaves the thread's checkpoint as the previous turn left it (not even the new message).
The run is then started again with the same input, from its start: the LangGraph server
does it for a run whose worker died (it keeps the run's input), a CLI user sends the
message again. The turn's writes to Redis and Postgres bear such a re-run, as they must
for a step re-run after a crash: messages go by id through seen-sets, batches by lease,
facts by key (only access counts may count twice). With ``"async"`` the re-run resumes
after the last step the checkpoint holds; it loses nothing either, and costs a checkpoint
per step.

Who runs turns so: every turn of a graph of `graph.builder.build_graph` with a scheduler,
the server's and the CLI's alike: the graph picks it (`graph.prefetch.MemoryGraph`) when
the caller asks for ``"async"`` (the server's default) or nothing; ``"sync"`` is kept.
Memory runs, session ends and inline memory (model calls after the reply, worth resuming)
keep LangGraph's ``"async"``. Nor does a turn whose scheduler call fails form memory in
its own run: the work waits in the pending list for the next memory run
(`memory_graph_agent.turn.closing.finish_turn`).
"""

from __future__ import annotations

from langgraph.types import Durability

from graph.context import MemoryScheduler
from memory_graph_agent.settings import Settings

TURN_DURABILITY: Durability = "exit"
"""The durability of a turn whose memory forms in the background."""


def turn_durability(settings: Settings, scheduler: MemoryScheduler | None) -> Durability | None:
    """``TURN_DURABILITY`` for the turns of a graph whose turns end at trim_window.

    ``scheduler``: the memory scheduler the graph was built with (``None``: memory forms
    inline, in the turn's run). Inline memory gets ``None``: LangGraph's default,
    ``"async"``. `graph.prefetch.MemoryGraph` applies it to the runs that are turns.
    """
    if scheduler is None or settings.formation.mode != "background":
        return None
    return TURN_DURABILITY
