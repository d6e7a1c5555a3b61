"""The seen-set of a thread on the real Redis: bounded, and still telling new messages from old."""

from __future__ import annotations

import uuid

from langchain_core.messages import AIMessage, HumanMessage

from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.window import StoredMessage
from memory_graph_agent.turn import windowing


async def test_seen_set_stays_bounded_and_still_tells_new_from_old(
    services, make_context, monkeypatch
):
    monkeypatch.setattr(windowing, "SEEN_SLACK", 40, raising=False)
    settings = Settings().override(window_size=6, summary_batch=4)
    ctx = make_context()
    user, thread = ctx.user_id, f"t-{uuid.uuid4().hex[:8]}"
    state: list = []  # what the checkpoint holds: the window plus the turn's messages
    for turn in range(150):
        state += [HumanMessage(f"q{turn}", id=f"h{turn}"), AIMessage(f"a{turn}", id=f"a{turn}")]
        update = await windowing.update_window(services, settings, ctx, thread, state, False, "")
        moved = {m.id for m in update.moved}
        state = [m for m in state if m.id not in moved]  # trim_window's RemoveMessage
        claim = await services.queue.claim(user, thread, "w", min_batch=1, max_batch=50, lease_s=5)
        if done := [m.id for m in claim.messages]:  # summarized and acknowledged
            await services.episodes.mark_summarized(user, thread, done)
            await services.queue.complete(user, thread, "w", done)

    seen = await services.redis.scard(services.queue.key("seen", user, thread))
    assert seen <= len(state) + 40 + 2, f"the seen-set holds {seen} ids for 300 messages"
    # what the checkpoint holds is still "seen": never new, never pushed twice
    admission = await services.threads.admit(user, thread, [m.id for m in state] + ["new-1"])
    assert admission.unseen == ["new-1"]
    stored = [StoredMessage.from_message(m) for m in state]
    assert await services.window.push(user, thread, stored) == 0
