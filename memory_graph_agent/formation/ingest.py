"""Storing a summary: upsert it, index its turns, acknowledge its batch, learn facts.

The row is upserted under a deterministic id *before* the batch is acknowledged, so a
replay is an upsert, never a duplicate. While Postgres is down the batch is retried with
backoff and dead-lettered after ``max_attempts``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from memory_graph_agent.core import metrics
from memory_graph_agent.core.kinds import MemoryKind
from memory_graph_agent.core.records import MemoryEvent, SummaryDraft, event
from memory_graph_agent.core.run import RunContext
from memory_graph_agent.formation.consolidation import consolidate_memory, record_fact_changes
from memory_graph_agent.profile.facts import extract_facts
from memory_graph_agent.prompting.llm import MemoryPrompts
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.memories import Memory
from memory_graph_agent.storage.outages import StoreUnavailable
from memory_graph_agent.storage.window import parse_ts

log = logging.getLogger(__name__)


@dataclass
class Stored:
    """What `store_summary` achieved (``stored`` is False when the batch waits for a retry)."""

    stored: bool = False
    summary_id: str = ""
    pending: int = 0
    summaries_since_reflection: int = 0
    importance_since_reflection: float = 0.0
    decisions: list[dict[str, Any]] = field(default_factory=list)
    events: list[MemoryEvent] = field(default_factory=list)

    def note(self, kind: str, text: str) -> None:
        """Add an event of `consolidate`."""
        self.events.append(event("consolidate", kind, text))


async def store_summary(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    draft: SummaryDraft,
    prompts: MemoryPrompts,
) -> Stored:
    """Store ``draft`` durably, then acknowledge its batch, then extract profile facts."""
    out = Stored()
    user, thread, worker = draft["user_id"], draft["thread_id"], draft["worker"]
    memory = Memory(
        user_id=user,
        thread_id=thread,
        kind=MemoryKind.SUMMARY,
        text=draft["text"],
        importance=draft["importance"],
        source_ids=draft["source_ids"],
        created_at=parse_ts(draft["created_at"]),
    )
    use_model = draft["mode"] != "raw"  # raw mode never calls the model
    try:
        # one embedding serves the similarity search and the stored row
        vector = (await services.embeddings.aembed_documents([memory.text]))[0]
        prompt = prompts.consolidate if use_model else None
        decision = await consolidate_memory(settings, ctx, services, memory, vector, prompt)
        await services.episodes.mark_summarized(user, thread, draft["source_ids"])
    except Exception as exc:  # nothing is lost: the batch stays claimed for a retry
        log.warning("storing summary failed (%s: %s)", type(exc).__name__, exc)
        try:
            outcome = await services.queue.fail(
                user,
                thread,
                worker,
                f"{type(exc).__name__}: {exc}",
                draft["source_ids"],
                max_attempts=settings.queue.max_attempts,
                backoff_s=settings.queue.retry_backoff_s,
            )
        except StoreUnavailable:  # the lease will expire and the batch be reclaimed
            outcome = "left leased"
        out.note("storage_failed", f"consolidate: storage failed, batch {outcome}")
        metrics.record_summary("failed")
        return out
    try:  # make the batch's raw turns searchable; best effort (`EpisodeLog.backfill`)
        context_weight = settings.recall.weights.turn_context_weight
        indexed = await services.episodes.index_batch(
            user, thread, draft["source_ids"], services.embeddings, context_weight
        )
        out.note("indexed", f"consolidate: {indexed} turns indexed for recall")
    except Exception as exc:  # the summary is stored: a missing vector loses nothing
        log.warning("indexing episodes failed (%s: %s)", type(exc).__name__, exc)
        out.note("index_skipped", "consolidate: turn indexing skipped (backfilled later)")
    try:
        acked = await services.queue.complete(user, thread, worker, draft["source_ids"])
    except StoreUnavailable:  # stored already; a reclaim after the lease is an upsert
        out.note("ack_deferred", f"consolidate: summary {memory.id[:8]} stored, ack deferred")
        return out
    target = f" into {decision.target_id[:8]}" if decision.target_id else ""
    out.note(
        "stored",
        f"consolidate: summary {memory.id[:8]} stored ({decision.action}{target}), {acked} acked",
    )
    out.summary_id = memory.id
    out.decisions.append(decision.as_dict())
    try:
        if use_model:
            await _learn_facts(services, settings, ctx, draft, memory.id, prompts, out)
        since, importance = await services.memories.reflection_progress(user)
        out.pending = await services.queue.backlog(user, thread)
    except StoreUnavailable:  # the summary is safe; facts can wait
        out.note("facts_skipped", "consolidate: profile/reflection bookkeeping skipped")
        return out
    metrics.set_pending(out.pending)
    out.stored = True
    out.summaries_since_reflection, out.importance_since_reflection = since, importance
    return out


async def _learn_facts(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    draft: SummaryDraft,
    summary_id: str,
    prompts: MemoryPrompts,
    out: Stored,
) -> None:
    """Profile facts from what the user said: the faithful summary, or their own words."""
    said = draft["user_text"]
    source = draft["text"] if draft["mode"] == "llm" else said
    facts = (
        await extract_facts(settings, ctx.model, prompts.extract_facts, source, [summary_id], said)
        if source
        else []
    )
    # stated when the batch's last message was sent: a retried older batch loses
    facts = [replace(f, updated_at=draft["created_at"]) for f in facts]
    user, thread = draft["user_id"], draft["thread_id"]
    changes = await services.profile.upsert(user, facts, settings.retention.ttl_days)
    written = [f"{c.key} {c.action}" for c in changes]
    out.note("facts", f"consolidate: profile facts: {', '.join(written) or 'none'}")
    out.decisions += await record_fact_changes(services, user, thread, summary_id, changes)
