"""Maintenance of users' memories (expire, evict, compact, each logged), checkpoints, decisions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from memory_graph_agent.core.memory_threads import ALTERNATES, memory_thread_id
from memory_graph_agent.services.stores import Services
from memory_graph_agent.storage.decisions import Decision
from memory_graph_agent.storage.memories import Memory

MEMORY_WORK = "memory work under way"
"""Why a memory thread is held whole: a batch leased, or backing off after a failure."""


def entry(memory: Memory, **extra: Any) -> dict[str, Any]:
    """One report line about ``memory``."""
    return {
        "id": memory.id,
        "user_id": memory.user_id,
        "kind": memory.kind,
        "importance": memory.importance,
        "text": memory.text[:120],
        **extra,
    }


async def log_actions(
    services: Services, action: str, entries: list[dict[str, Any]], target_key: str = ""
) -> None:
    """Record one ``maintenance`` decision per entry (``item_id`` is ``action:memory id``)."""
    for e in entries:
        await services.decisions.record(
            Decision(
                user_id=e["user_id"],
                item_kind="maintenance",
                item_id=f"{action}:{e['id']}",
                action=action,
                target_id=e.get(target_key) if target_key else e["id"],
                detail={k: v for k, v in e.items() if k not in ("user_id",)},
            )
        )


def plan_compaction(
    memories: dict[str, Memory], pairs: list[tuple[str, str, float]]
) -> list[tuple[Memory, Memory, float]]:
    """``(duplicate, kept, similarity)`` for each memory to supersede.

    The keeper of a group is the pinned, then most important, then oldest memory;
    pinned memories are never superseded.
    """
    neighbours: dict[str, dict[str, float]] = defaultdict(dict)
    for a, b, sim in pairs:
        if a in memories and b in memories:
            neighbours[a][b] = neighbours[b][a] = sim
    order = sorted(
        (memories[i] for i in neighbours),
        key=lambda m: (not m.pinned, -m.importance, m.created_at, m.id),
    )
    rank = {m.id: i for i, m in enumerate(order)}
    superseded: dict[str, tuple[Memory, Memory, float]] = {}
    for keeper in order:
        if keeper.id in superseded:
            continue
        for other_id, sim in neighbours[keeper.id].items():
            other = memories[other_id]
            # higher-ranked neighbours are keepers already (they would have taken this one)
            if other_id not in superseded and not other.pinned and rank[other_id] > rank[keeper.id]:
                superseded[other_id] = (other, keeper, sim)
    return list(superseded.values())


async def expire_memories(services: Services, user: str, dry_run: bool) -> list[dict[str, Any]]:
    """Delete ``user``'s expired, unpinned memories (only report them on a dry run).

    A superseded memory goes with its successor (`MemoryStore.orphaned`): the provenance
    of a memory that is gone, left by an earlier deletion or by this one, is no one's.
    """
    found = [entry(m, expires_at=m.expires_at) for m in await services.memories.expired(user)]
    orphans = await services.memories.orphaned(user, [e["id"] for e in found])
    found += [entry(m, superseded_by=m.superseded_by) for m in orphans]
    if found and not dry_run:
        await log_actions(services, "expired", found)
        await services.memories.delete(user, [e["id"] for e in found])
    return found


async def evict_memories(
    services: Services,
    user: str,
    below_importance: float,
    after_days: float,
    dry_run: bool,
    already_gone: set[str],
) -> list[dict[str, Any]]:
    """Delete ``user``'s unpinned memories below an importance and older than some days.

    Memories in ``already_gone`` (expired in this run, or would be on a dry run) are not
    counted twice.
    """
    old = await services.memories.evictable(user, below_importance, after_days)
    found = [entry(m, created_at=m.created_at) for m in old if m.id not in already_gone]
    if found and not dry_run:
        await log_actions(services, "evicted", found)
        await services.memories.delete(user, [e["id"] for e in found])
    return found


async def compact_memories(
    services: Services, user: str, min_similarity: float, dry_run: bool, already_gone: set[str]
) -> list[dict[str, Any]]:
    """Supersede ``user``'s active memories at least ``min_similarity`` alike (`plan_compaction`).

    The keeper of a group then stands for its duplicates: it lives as long as the
    longest-lived of them (a superseded row is never recalled again).
    """
    pairs = await services.memories.duplicate_pairs(user, min_similarity)
    ids = {i for a, b, _ in pairs for i in (a, b)} - already_gone
    memories = {m.id: m for m in await services.memories.get(user, sorted(ids))}
    found = [
        entry(dup, kept=kept.id, similarity=round(sim, 4))
        for dup, kept, sim in plan_compaction(memories, pairs)
    ]
    if not found or dry_run:
        return found
    await log_actions(services, "compacted", found, target_key="kept")
    by_keeper: dict[str, list[str]] = defaultdict(list)
    for e in found:
        by_keeper[e["kept"]].append(e["id"])
    for kept, dups in by_keeper.items():
        await services.memories.supersede(user, dups, kept)
        ends = [m.expires_at for m in (memories[kept], *(memories[d] for d in dups))]
        until = None if any(e is None for e in ends) else max(ends)
        await services.memories.extend_expiry(user, kept, until)
    return found


class CheckpointRetention(Protocol):
    """Where threads' checkpoints live (`storage.checkpoints`, `storage.server_threads`)."""

    async def survey(self, thread_ids: Sequence[str]) -> dict[str, Literal["prune", "in_flight"]]:
        """Threads with something to prune: ``prune``, or ``in_flight`` (a run is under way)."""

    async def prune(self, thread_ids: Sequence[str]) -> None:
        """Keep only the latest checkpoint (and its pending writes) of each thread."""


async def prune_thread_checkpoints(
    services: Services, checkpoints: CheckpointRetention, users: Sequence[str], dry_run: bool
) -> list[dict[str, Any]]:
    """Prune the checkpoints of ``users``' conversation and memory threads to the latest.

    Held whole: a thread with a run in flight, and the memory threads of a conversation
    whose memory work is under way (a batch leased, or backing off after a failure).
    Messages that only wait for a full batch hold nothing: the next memory run starts
    from the latest checkpoint, which is kept. Returns one entry per thread with
    something to prune: ``action`` is ``pruned`` (or would be, on a dry run) or ``held``.
    """
    owned = await services.threads.threads_of(users)
    kinds: dict[str, dict[str, Any]] = {}
    held: dict[str, str] = {}
    for user, threads in owned.items():
        for thread in sorted(threads):
            kinds[thread] = {"user_id": user, "thread_id": thread, "kind": "conversation"}
            under_way = await services.queue.claimed(user, thread)
            for attempt in range(ALTERNATES):
                memory = memory_thread_id(user, thread, attempt)
                kinds[memory] = {"user_id": user, "thread_id": thread, "kind": "memory"}
                if under_way:
                    held[memory] = MEMORY_WORK
    verdicts = await checkpoints.survey(sorted(kinds))
    found = []
    for thread_id, verdict in verdicts.items():
        reason = held.get(thread_id) or ("run in flight" if verdict == "in_flight" else "")
        action = {"action": "held", "reason": reason} if reason else {"action": "pruned"}
        found.append({"id": thread_id, **kinds[thread_id], **action})
    if not dry_run:
        await checkpoints.prune([e["id"] for e in found if e["action"] == "pruned"])
    return found


async def prune_decisions(
    services: Services, user: str, retention_days: int, dry_run: bool
) -> dict[str, Any] | None:
    """Delete ``user``'s decisions older than ``retention_days`` (only count them on a dry run).

    Kept whatever their age: the decisions of a thread with memory work left (pending,
    claimed or dead-lettered), since a retried batch reads its summary's recorded decision
    (`formation.consolidation.consolidate_memory`) to replay it instead of deciding again.
    Returns ``{user_id, pruned, held_threads, before}``, or ``None`` when nothing is old enough.
    """
    before = datetime.now(UTC) - timedelta(days=retention_days)
    held = []
    for thread in await services.decisions.threads_before(user, before):
        left = await services.queue.backlog(user, thread)
        if left or await services.queue.dead_count(user, thread):
            held.append(thread)
    pruned = await services.decisions.prune(user, before, held, dry_run)
    if not pruned and not held:
        return None
    return {"user_id": user, "pruned": pruned, "held_threads": held, "before": before.isoformat()}
