"""The end of a turn: mirror it into the window, count what was shown, hand memory on.

One implementation for every way a turn runs: the ``trim_window`` node of the
``memory_agent`` graph (and of `add_memory` graphs) and the ``MemoryMiddleware`` of
``create_agent`` agents all end a turn here. The turn is pushed into the Redis window
(each message once), whole turns beyond the window move to the durable pending list
(`windowing.update_window`: never inside a turn, so a tool call stays with its results),
the recalled items the model saw are counted as accessed, and due memory work is handed
to ``schedule`` (a memory run: summarize, consolidate, reflect).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import RemoveMessage

from memory_graph_agent.core.records import MemoryEvent, event
from memory_graph_agent.core.run import RunContext
from memory_graph_agent.recall.retrieval import record_access
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.turn.windowing import WindowUpdate, update_window

log = logging.getLogger(__name__)

Scheduler = Callable[..., Awaitable[None]]
"""Starts a thread's memory run soon: ``(ctx, thread_id, compress, *, delay_s)``
(`graph.context.MemoryScheduler`)."""
Touch = Callable[[list[Any]], Awaitable[None]]
"""Counts the access of the recalled items the model saw."""


@dataclass
class TurnEnd:
    """What ending the turn did: the window update, and whether memory was handed on."""

    window: WindowUpdate
    due: bool = False
    """A batch is due (or the backlog must be compressed): memory should run."""
    scheduled: bool = False
    """``schedule`` accepted the work: the memory run forms it, not this run."""
    deferred: bool = False
    """``schedule`` raised: the work waits, durably in the pending list, for a later memory
    run (the next turn schedules it again) or the session end; not this run either."""
    events: list[MemoryEvent] = field(default_factory=list)
    removed: list[RemoveMessage] = field(default_factory=list)
    """The state's messages that left the window: the caller's ``messages`` update."""

    @property
    def forms_here(self) -> bool:
        """Whether this run forms the due memory itself (inline memory, a session end)."""
        return self.due and not self.scheduled and not self.deferred


async def finish_turn(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    thread_id: str,
    messages: Sequence[Any],
    *,
    end_session: bool,
    next_system_prompt: str,
    recalled: list[Any],
    scheduler: Scheduler | None = None,
    touch: Touch | None = None,
) -> TurnEnd:
    """Push ``messages`` into the window, move the overflow, then hand due memory on.

    ``touch`` counts the access of ``recalled`` (default: our memory's access counters).
    ``scheduler`` takes due work in ``formation.mode="background"``, in
    ``formation.delay_s``. Without it (inline memory, or a session end) due work is left
    to the caller (`TurnEnd.forms_here`). A ``scheduler`` that raises leaves the work waiting
    (``deferred``, a ``deferred`` event), never to this run: a turn that hands memory to
    the background may run with durability ``"exit"`` (`graph.durability`), which suits a
    short turn, not the model calls of memory.
    """
    user = ctx.user_id
    window = await update_window(
        services, settings, ctx, thread_id, messages, end_session, next_system_prompt
    )
    if not end_session:  # after the reply: the recall of this turn, as access statistics
        if touch is None:
            await record_access(services, user, recalled)
        else:
            await touch(recalled)
    in_state = {m.id for m in messages}
    removed = [RemoveMessage(id=m.id) for m in window.moved if m.id in in_state]
    end = TurnEnd(window, events=list(window.events), removed=removed)
    end.due = window.pending >= settings.formation.summary_batch or window.compress
    background = scheduler is not None and settings.formation.mode == "background"
    if not background or not end.due or end_session:
        return end
    try:
        await scheduler(ctx, thread_id, window.compress, delay_s=settings.formation.delay_s)
    except Exception as exc:  # no scheduler reachable: the work waits for a later run
        log.warning("memory run of thread %s not scheduled (%r); its messages wait", thread_id, exc)
        end.deferred = True
        text = (
            f"trim_window: background memory unavailable ({type(exc).__name__}); "
            f"{window.pending} messages wait for the next memory run"
        )
        end.events.append(event("trim_window", "deferred", text))
    else:
        end.scheduled = True
        text = f"trim_window: {window.pending} messages handed to a background memory run"
        end.events.append(event("trim_window", "scheduled", text))
    return end
