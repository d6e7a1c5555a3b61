"""Idle threads: archive a thread nobody wrote to for ``idle_thread_days``, then free its keys.

A thread keeps a window, a seen-set and a running summary in Redis for as long as it
lives; a user who opens a thread a day would pile them up for good. Maintenance does for
an idle thread what a session end does: its window is logged durably, moved to the
pending list in one step and summarized batch by batch (`draft_summary`,
`store_summary`: exactly once, under leases), then a reflection if one is due. Only then,
with nothing left in the window or the queue, do the three keys go (`WindowStore.release`).

Nothing is lost with them. Every message of the window is in the episodic log, and now in
a summary and the recall index; the seen-set's ids are the log's; the running summary
quotes the thread's summaries, which are memories. ``owner:{thread}`` stays, so the thread
remains its owner's, and the owner's next turn drops the archived messages its checkpoint
still holds (`admission.start_turn`) instead of storing them twice.

What waits in the pending list goes with the window, as at a session end: after a
conversation, fewer than ``summary_batch`` messages often wait there for more. Never
touched: a thread whose batch is leased or backing off after a failure (its memory run
owns it; once that is over, the archive reclaims it), a thread with dead-lettered batches
(`memory redrive` owns them), and a thread with a turn under way (its ``active`` mark,
set when a turn is admitted: the flush and the release both refuse it, atomically).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from memory_graph_agent.core.run import RunContext, for_user
from memory_graph_agent.formation.ingest import store_summary
from memory_graph_agent.formation.reflection import reflect_if_due
from memory_graph_agent.formation.summaries import draft_summary
from memory_graph_agent.prompting.llm import MemoryPrompts
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings

IN_FLIGHT = "turn under way"
CLAIMED = "memory work under way (a batch leased, or backing off after a failure)"
DEAD = "dead-lettered batches (memory redrive)"


async def archive_idle_threads(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    user: str,
    prompts: MemoryPrompts,
    dry_run: bool,
) -> list[dict[str, Any]]:
    """Archive ``user``'s threads idle for ``settings.retention.idle_thread_days``; one entry each.

    An entry is ``{user_id, thread_id, idle_since, action}``: ``archived`` (or would be, on a
    dry run) with ``messages`` (how many it summarized: the window's and the pending
    list's), or ``held`` with a ``reason``. Threads with nothing left to release are not listed.
    """
    before = datetime.now(UTC) - timedelta(days=settings.retention.idle_thread_days)
    idle = await services.episodes.idle_threads(user, before)
    found = []
    for thread in await services.window.retained(user, sorted(idle)):
        entry = {"user_id": user, "thread_id": thread, "idle_since": idle[thread].isoformat()}
        if reason := await _held(services, user, thread):
            found.append({**entry, **_outcome(reason, messages=None)})
        elif dry_run:
            waiting = len(await services.window.window(user, thread))
            waiting += await services.queue.backlog(user, thread)
            found.append({**entry, **_outcome("", messages=waiting)})
        else:
            own = for_user(ctx, user)
            found.append({**entry, **await _archive(services, settings, own, thread, prompts)})
    return found


async def _held(services: Services, user: str, thread: str) -> str:
    """Why the thread must not be archived now ("" when it may)."""
    if await services.window.in_use(user, thread):
        return IN_FLIGHT
    if await services.queue.claimed(user, thread):
        return CLAIMED
    if await services.queue.dead_count(user, thread):
        return DEAD
    return ""


async def _archive(
    services: Services, settings: Settings, ctx: RunContext, thread: str, prompts: MemoryPrompts
) -> dict[str, Any]:
    """A session end of ``thread`` by maintenance, then the release of its keys."""
    user = ctx.user_id
    window = await services.window.window(user, thread)
    await services.episodes.append(user, thread, window, durable=True)  # before any move
    if await services.window.archive_flush(user, thread) is None:
        return _outcome(IN_FLIGHT, messages=None)  # a turn was admitted meanwhile
    total = left = await services.queue.backlog(user, thread)
    while left:
        drafted = await draft_summary(services, settings, ctx, thread, True, prompts.summarize)
        if drafted.draft is None:  # claimed by another worker meanwhile
            return _outcome(CLAIMED, messages=total)
        await store_summary(services, settings, ctx, drafted.draft, prompts)
        if (now := await services.queue.backlog(user, thread)) >= left:
            return _outcome(CLAIMED, messages=total)  # it failed: retried, or dead-lettered
        left = now
    if await services.queue.dead_count(user, thread):  # a batch failed for good meanwhile
        return _outcome(DEAD, messages=total)
    if total:
        await reflect_if_due(services, settings, ctx, prompts.reflect)
    if await services.window.release(user, thread) is None:
        return _outcome(IN_FLIGHT, messages=total)
    return _outcome("", messages=total)


def _outcome(reason: str, messages: int | None) -> dict[str, Any]:
    """A held entry (with ``reason``), or an archived one."""
    if reason:
        return {"action": "held", "reason": reason, "messages": messages}
    return {"action": "archived", "messages": messages}
