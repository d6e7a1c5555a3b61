"""Summaries of the overflow: claim a leased batch of pending messages, compress it.

A batch is whole turns: ``summary_batch`` messages, extended to the end of the turn the
last of them falls in (fewer when its transcript would not fit the context, but never part
of a turn). If the run dies before the summary is stored, the lease expires and a later
run gets the same batch.
"""

from __future__ import annotations

import logging
import uuid
from typing import NamedTuple

from langchain_core.messages import HumanMessage

from memory_graph_agent.core import metrics
from memory_graph_agent.core.records import MemoryEvent, SummaryDraft, event
from memory_graph_agent.core.run import RunContext
from memory_graph_agent.prompting.budgets import (
    batch_that_fits,
    context_tokens,
    count_tokens,
    keep_newest,
    trigger_budget,
)
from memory_graph_agent.prompting.guards import summary_is_faithful
from memory_graph_agent.prompting.llm import invoke_text
from memory_graph_agent.prompting.rendering import defang, limit_words, now_iso
from memory_graph_agent.services.models import load_chat_model
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.outages import StoreUnavailable

log = logging.getLogger(__name__)

MAX_BATCH = 50
THREAD_SUMMARY_WORDS = 250
LLM_IMPORTANCE = 0.5
FALLBACK_IMPORTANCE = 0.3


class Drafted(NamedTuple):
    """What `draft_summary` did."""

    draft: SummaryDraft | None
    """The summary, ``None`` when nothing was claimed."""
    drained: bool
    """Whether the drained backlog is now empty."""
    events: list[MemoryEvent]
    retry_in_s: float | None = None
    """When another worker leases the batch, or its retries back off: seconds until a
    new run could claim it (a memory run asks its scheduler for one then)."""


async def draft_summary(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    thread_id: str,
    draining: bool,
    prompt: str,
) -> Drafted:
    """Claim the oldest pending batch and summarize it (≤ 100 words; raw if the model fails).

    A batch is ``summary_batch`` messages to the end of their last turn, so summaries keep
    one grain however many turns a (background, coalesced) run finds waiting: the graph
    loops back for the next batch. ``draining`` claims any non-empty backlog (compression
    or session end) in batches of whole turns as large as fit; ``prompt`` has a
    ``{transcript}`` placeholder.
    """
    user = ctx.user_id
    worker = uuid.uuid4().hex
    try:
        fits = await _max_batch(services, settings, ctx, thread_id, prompt)
        claim = await services.queue.claim(
            user,
            thread_id,
            worker,
            min_batch=1 if draining else settings.formation.summary_batch,
            max_batch=fits if draining else settings.formation.summary_batch,
            lease_s=settings.queue.lease_seconds,
            fits=fits,
        )
        left = await services.window.pending_len(user, thread_id) if draining else 1
    except StoreUnavailable:  # the backlog waits in Redis for a later turn
        text = "summarize: Redis unavailable, backlog kept for later"
        return Drafted(None, False, [event("summarize", "unavailable", text)])
    batch = claim.messages
    if not batch:  # too few, leased by another worker, or backing off after a failure
        text = f"summarize: nothing claimed ({claim.status})"
        if claim.retry_in_s is not None:
            text += f", claimable in {claim.retry_in_s:.1f} s"
        events = [event("summarize", f"nothing_{claim.status}", text)]
        return Drafted(None, False, events, claim.retry_in_s)
    transcript = "\n".join(m.render() for m in batch)
    said = "\n".join(m.content for m in batch if m.role == "human")
    if settings.formation.summary_mode == "raw":
        text, importance, mode = transcript, LLM_IMPORTANCE, "raw"
    else:
        text, importance, mode = await _compress(settings, ctx, prompt, transcript, said)
    metrics.record_summary(mode)
    draft = SummaryDraft(
        text=text,
        importance=importance,
        mode=mode,
        source_ids=[m.id for m in batch],
        user_text=limit_words(said, 600),
        user_id=user,
        thread_id=thread_id,
        created_at=batch[-1].ts or now_iso(),
        worker=worker,
    )
    note = (
        f"summarize: {len(batch)} messages ({claim.status}) -> {mode} summary "
        f"(importance {importance})"
    )
    return Drafted(draft, draining and not left, [event("summarize", claim.status, note)])


async def _max_batch(
    services: Services, settings: Settings, ctx: RunContext, thread_id: str, prompt: str
) -> int:
    """Largest batch whose transcript fits the summarizer's prompt budget (at least 1).

    Long messages (a compressed window) would otherwise make a 50-message transcript
    larger than the model's context.
    """
    cap = max(MAX_BATCH, settings.formation.summary_batch)
    oldest = [m for _, m in await services.window.pending(ctx.user_id, thread_id, cap)]
    if not oldest:
        return cap
    budget = trigger_budget(context_tokens(settings, ctx.model), settings.window.trigger_ratio)
    overhead = count_tokens([HumanMessage(prompt)])
    return min(cap, batch_that_fits(oldest, budget, overhead=overhead))


async def _compress(
    settings: Settings, ctx: RunContext, prompt: str, transcript: str, said: str
) -> tuple[str, float, str]:
    """LLM summary (importance 0.5), or the raw transcript (0.3) if the model fails."""
    try:
        model = load_chat_model(ctx.model)
        filled = prompt.format(transcript=defang(transcript))
        answer = await invoke_text(model, filled, settings.limits.model_timeout_s, "summarize")
        text = limit_words(answer, 100)
        if not summary_is_faithful(text, said):
            raise ValueError(f"summary not grounded in the conversation: {text[:80]!r}")
        return text, LLM_IMPORTANCE, "llm"
    except Exception as exc:  # timeouts, provider errors, empty or invented output
        log.warning("summarizer failed (%s: %s); storing raw text", type(exc).__name__, exc)
        return transcript, FALLBACK_IMPORTANCE, "fallback"


def merge_thread_summary(previous: str, new: str) -> str:
    """Append the new summary; keep the newest ``THREAD_SUMMARY_WORDS`` words and tokens."""
    words = f"{previous} {new}".split()
    return keep_newest(" ".join(words[-THREAD_SUMMARY_WORDS:]))


async def rebuild_thread_summary(services: Services, user_id: str, thread_id: str) -> str:
    """The running summary of a thread whose Redis copy went (an idle thread's archive).

    Rebuilt as consolidate builds it, from the thread's stored summaries (their text now:
    a merge may have changed it), and written back for the thread's next turns.
    """
    merged = ""
    for memory in await services.memories.thread_summaries(user_id, thread_id):
        merged = merge_thread_summary(merged, limit_words(memory.text, 100))
    if merged:
        await services.window.set_thread_summary(user_id, thread_id, merged)
    return merged


async def extend_thread_summary(
    services: Services, user_id: str, thread_id: str, text: str, fallback: str | None
) -> str:
    """Add a stored summary (first 100 words) to the thread's running summary; return it.

    Redis holds the running summary: a background memory run writes it, the thread's next
    turn reads it. With Redis down, ``fallback`` (the state's copy) is extended instead.
    """
    new = limit_words(text, 100)
    try:
        merged = merge_thread_summary(await services.window.thread_summary(user_id, thread_id), new)
        await services.window.set_thread_summary(user_id, thread_id, merged)
    except StoreUnavailable:
        return merge_thread_summary(fallback or "", new)
    return merged
