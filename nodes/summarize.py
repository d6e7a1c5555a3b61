"""summarize: claim a batch of the thread's overflow and compress it, with provenance.

The batch is leased (`stores.queue.PendingQueue.claim`): if this run dies before
`consolidate` acknowledges it, the lease expires and a later run gets the same batch.
"""

from __future__ import annotations

import logging
import uuid

from langgraph.runtime import Runtime

from graph import metrics
from graph.context import Context
from graph.guards import summary_is_faithful
from graph.models import load_chat_model
from graph.prompts import SUMMARIZE_PROMPT
from graph.state import State
from graph.utils import current_thread_id, invoke_text, limit_words, now_iso
from stores.failsafe import REDIS_DOWN, outages
from stores.services import get_services

log = logging.getLogger(__name__)

MAX_BATCH = 50
LLM_IMPORTANCE = 0.5
FALLBACK_IMPORTANCE = 0.3


async def summarize(state: State, runtime: Runtime[Context]) -> dict:
    """Summarize the oldest pending messages (≤ 100 words); raw text if the model fails."""
    ctx = runtime.context
    thread_id = current_thread_id()
    services = await get_services(ctx.embedding_model)
    worker = uuid.uuid4().hex
    try:
        claim = await services.queue.claim(
            ctx.user_id,
            thread_id,
            worker,
            min_batch=ctx.summary_batch,
            max_batch=max(MAX_BATCH, ctx.summary_batch),
            lease_s=ctx.lease_seconds,
        )
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
    return {"summary": summary, "memory_events": [*state.get("memory_events", []), event]}


async def _compress(ctx: Context, transcript: str, said: str) -> tuple[str, float, str]:
    """LLM summary (importance 0.5), or the raw transcript (0.3) if the model fails."""
    try:
        model = load_chat_model(ctx.model)
        prompt = SUMMARIZE_PROMPT.format(transcript=transcript)
        text = limit_words(await invoke_text(model, prompt, ctx.model_timeout_s), 100)
        if not summary_is_faithful(text, said):
            raise ValueError(f"summary not grounded in the conversation: {text[:80]!r}")
        return text, LLM_IMPORTANCE, "llm"
    except Exception as exc:  # timeouts, provider errors, empty or invented output
        log.warning("summarizer failed (%s: %s); storing raw text", type(exc).__name__, exc)
        return transcript, FALLBACK_IMPORTANCE, "fallback"
