"""consolidate: store the summary durably, then acknowledge its batch, then extract facts."""

from __future__ import annotations

import logging
from dataclasses import replace

from langgraph.runtime import Runtime

from graph.context import Context
from graph.state import State
from memory_graph_agent import metrics
from memory_graph_agent.consolidation import consolidate_memory, record_fact_changes
from memory_graph_agent.facts import extract_facts
from memory_graph_agent.services import get_services
from memory_graph_agent.storage.failsafe import POSTGRES_DOWN, REDIS_DOWN, outages
from memory_graph_agent.storage.memories import Memory
from memory_graph_agent.storage.window import parse_ts
from memory_graph_agent.utils import current_thread_id, events_so_far, limit_words

log = logging.getLogger(__name__)

THREAD_SUMMARY_WORDS = 250


def merge_thread_summary(previous: str, new: str) -> str:
    """Append the new summary; keep the newest ``THREAD_SUMMARY_WORDS`` words."""
    words = f"{previous} {new}".split()
    return " ".join(words[-THREAD_SUMMARY_WORDS:])


async def consolidate(state: State, runtime: Runtime[Context]) -> dict:
    """Upsert the summary under a deterministic id, ack its messages, update the profile.

    If Postgres is unavailable the batch stays claimed and is retried with exponential
    backoff on later turns (dead-lettered after ``max_attempts``); the deterministic id
    makes every retry an upsert, never a duplicate.
    """
    ctx = runtime.context
    summary = state.get("summary")
    events = events_so_far(state)
    if not summary:
        return {"summary": None}
    thread_id = current_thread_id()
    if (summary.get("user_id"), summary.get("thread_id")) != (ctx.user_id, thread_id):
        # A summary is only ever made by this run's summarize; one naming another user
        # or thread (a state edit, a forged checkpoint) is dropped, never stored.
        log.warning("dropping a summary that is not this run's (user/thread mismatch)")
        events.append("consolidate: dropped a summary that is not this run's user/thread")
        return {"summary": None, "summary_stored": False, "memory_events": events}
    services = await get_services(ctx.embedding_model)
    memory = Memory(
        user_id=ctx.user_id,
        thread_id=thread_id,
        kind="summary",
        text=summary["text"],
        importance=summary["importance"],
        source_ids=summary["source_ids"],
        created_at=parse_ts(summary["created_at"]),
    )
    user, thread, worker = ctx.user_id, thread_id, summary.get("worker", "")
    try:
        # one embedding serves the similarity search and the stored row
        vector = (await services.embeddings.aembed_documents([memory.text]))[0]
        decision = await consolidate_memory(
            ctx, services, memory, vector, use_model=summary.get("mode") != "raw"
        )
        await services.episodes.mark_summarized(user, thread, summary["source_ids"])
    except Exception as exc:  # nothing is lost: the batch stays claimed for a retry
        log.warning("storing summary failed (%s: %s)", type(exc).__name__, exc)
        try:
            outcome = await services.queue.fail(
                user,
                thread,
                worker,
                f"{type(exc).__name__}: {exc}",
                max_attempts=ctx.max_attempts,
                backoff_s=ctx.retry_backoff_s,
            )
        except REDIS_DOWN:  # the lease will expire and the batch be reclaimed
            outcome = "left leased"
        events.append(f"consolidate: storage failed, batch {outcome}")
        metrics.record_summary("failed")
        return {"summary": None, "summary_stored": False, "memory_events": events}
    try:  # make the batch's raw turns searchable; best effort (`EpisodeLog.backfill`)
        indexed = await services.episodes.index_batch(
            user, thread, summary["source_ids"], services.embeddings
        )
        events.append(f"consolidate: {indexed} turns indexed for recall")
    except Exception as exc:  # the summary is stored: a missing vector loses nothing
        log.warning("indexing episodes failed (%s: %s)", type(exc).__name__, exc)
        events.append("consolidate: turn indexing skipped (EpisodeLog.backfill indexes later)")
    try:
        acked = await services.queue.complete(user, thread, worker)
    except REDIS_DOWN as exc:  # stored already; a reclaim after the lease is an upsert
        outages.failed("redis", exc)
        events.append(f"consolidate: summary {memory.id[:8]} stored, ack deferred (Redis down)")
        return {"summary": None, "summary_stored": False, "memory_events": events}
    target = f" into {decision.target_id[:8]}" if decision.target_id else ""
    events.append(
        f"consolidate: summary {memory.id[:8]} stored ({decision.action}{target}), {acked} acked"
    )
    decisions = [*state.get("memory_decisions", []), decision.as_dict()]

    try:
        if summary.get("mode") != "raw":  # raw mode never calls the model
            # Facts come from what the user said: the faithful summary, or their own words.
            source = summary["text"] if summary["mode"] == "llm" else summary.get("user_text", "")
            said = summary.get("user_text", "")
            facts = await extract_facts(ctx, source, [memory.id], said) if source else []
            # stated when the batch's last message was sent: a retried older batch loses
            facts = [replace(f, updated_at=summary["created_at"]) for f in facts]
            changes = await services.profile.upsert(ctx.user_id, facts, ctx.ttl_days)
            written = [f"{c.key} {c.action}" for c in changes]
            events.append(f"consolidate: profile facts: {', '.join(written) or 'none'}")
            decisions += await record_fact_changes(services, user, thread, memory.id, changes)
        since, importance = await services.memories.reflection_progress(ctx.user_id)
        pending = await services.queue.backlog(user, thread)
    except (*REDIS_DOWN, *POSTGRES_DOWN) as exc:  # the summary is safe; facts can wait
        outages.failed("redis" if isinstance(exc, REDIS_DOWN) else "postgres", exc)
        events.append("consolidate: profile/reflection bookkeeping skipped (service down)")
        return {"summary": None, "summary_stored": False, "memory_events": events}
    metrics.set_pending(pending)
    return {
        "summary": None,
        "summary_stored": True,
        "thread_summary": merge_thread_summary(
            state.get("thread_summary", ""), limit_words(summary["text"], 100)
        ),
        "summaries_since_reflection": since,
        "importance_since_reflection": importance,
        "memory_decisions": decisions,
        "pending_count": pending,
        "memory_events": events,
    }
