"""summarize: claim a batch of the thread's overflow and compress it, with provenance.

A batch holds ``summary_batch`` to 50 messages, fewer when their transcript would not fit
``trigger_ratio × context_window_tokens``; while the window is being compressed (or
the session archived) any non-empty backlog is claimed. The batch is leased
(`memory_graph_agent.storage.queue.PendingQueue.claim`): if this run dies before `consolidate`
acknowledges it, the lease expires and a later run gets the same batch.
"""

from __future__ import annotations

import logging
import uuid

from langchain_core.messages import HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.runtime import Runtime

from graph.context import Context
from graph.prompts import SUMMARIZE_PROMPT
from graph.state import State
from memory_graph_agent import metrics
from memory_graph_agent.budgets import batch_that_fits, trigger_budget
from memory_graph_agent.guards import summary_is_faithful
from memory_graph_agent.models import load_chat_model
from memory_graph_agent.services import Services, get_services
from memory_graph_agent.storage.failsafe import REDIS_DOWN, outages
from memory_graph_agent.utils import current_thread_id, defang, invoke_text, limit_words, now_iso

log = logging.getLogger(__name__)

MAX_BATCH = 50
LLM_IMPORTANCE = 0.5
FALLBACK_IMPORTANCE = 0.3
_PROMPT_OVERHEAD = count_tokens_approximately([HumanMessage(SUMMARIZE_PROMPT)])


async def summarize(state: State, runtime: Runtime[Context]) -> dict:
    """Summarize the oldest pending messages (≤ 100 words); raw text if the model fails."""
    ctx = runtime.context
    thread_id = current_thread_id()
    services = await get_services(ctx.embedding_model)
    worker = uuid.uuid4().hex
    draining = bool(state.get("compress") or state.get("end_session"))
    try:
        max_batch = await _max_batch(services, ctx, thread_id)
        claim = await services.queue.claim(
            ctx.user_id,
            thread_id,
            worker,
            min_batch=1 if draining else ctx.summary_batch,
            max_batch=max_batch,
            lease_s=ctx.lease_seconds,
        )
        left = await services.window.pending_len(ctx.user_id, thread_id) if draining else 1
    except REDIS_DOWN as exc:  # the backlog waits in Redis for a later turn
        outages.failed("redis", exc)
        event = "summarize: Redis unavailable, backlog kept for later"
        return {"summary": None, "memory_events": [*state.get("memory_events", []), event]}
    batch = claim.messages
    if not batch:  # too few, leased by another worker, or backing off after a failure
        event = f"summarize: nothing claimed ({claim.status})"
        return {"summary": None, "memory_events": [*state.get("memory_events", []), event]}
    transcript = "\n".join(m.render() for m in batch)
    said = "\n".join(m.content for m in batch if m.role == "human")
    if ctx.summary_mode == "raw":
        text, importance, mode = transcript, LLM_IMPORTANCE, "raw"
    else:
        text, importance, mode = await _compress(ctx, transcript, said)
    metrics.record_summary(mode)
    summary = {
        "text": text,
        "importance": importance,
        "mode": mode,
        "source_ids": [m.id for m in batch],
        "user_text": limit_words(said, 600),
        "user_id": ctx.user_id,
        "thread_id": thread_id,
        "created_at": batch[-1].ts or now_iso(),
        "worker": worker,
    }
    event = (
        f"summarize: {len(batch)} messages ({claim.status}) -> {mode} summary "
        f"(importance {importance})"
    )
    update = {"summary": summary, "memory_events": [*state.get("memory_events", []), event]}
    if draining and not left:  # this is the last batch of the drain: compression done
        update["compress"] = False
    return update


async def _max_batch(services: Services, ctx: Context, thread_id: str) -> int:
    """Largest batch whose transcript fits the summarizer's prompt budget (at least 1).

    Long messages (a compressed window) would otherwise make a 50-message transcript
    larger than the model's context.
    """
    cap = max(MAX_BATCH, ctx.summary_batch)
    oldest = [m for _, m in await services.window.pending(ctx.user_id, thread_id, cap)]
    if not oldest:
        return cap
    budget = trigger_budget(ctx.context_window_tokens, ctx.trigger_ratio)
    return min(cap, batch_that_fits(oldest, budget, overhead=_PROMPT_OVERHEAD))


async def _compress(ctx: Context, transcript: str, said: str) -> tuple[str, float, str]:
    """LLM summary (importance 0.5), or the raw transcript (0.3) if the model fails."""
    try:
        model = load_chat_model(ctx.model)
        prompt = SUMMARIZE_PROMPT.format(transcript=defang(transcript))
        text = limit_words(await invoke_text(model, prompt, ctx.model_timeout_s), 100)
        if not summary_is_faithful(text, said):
            raise ValueError(f"summary not grounded in the conversation: {text[:80]!r}")
        return text, LLM_IMPORTANCE, "llm"
    except Exception as exc:  # timeouts, provider errors, empty or invented output
        log.warning("summarizer failed (%s: %s); storing raw text", type(exc).__name__, exc)
        return transcript, FALLBACK_IMPORTANCE, "fallback"
