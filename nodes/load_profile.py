"""load_profile: validate the turn's input, then read the user's profile from Redis.

Besides the live facts (expired ones are left out) it loads the profile's recent
changes (``change_note_days``), which respond notes in the prompt.
"""

from __future__ import annotations

from langchain_core.messages import HumanMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from graph.context import Context
from graph.state import State
from memory_graph_agent.services import get_services
from memory_graph_agent.storage.failsafe import REDIS_DOWN, outages
from memory_graph_agent.utils import DEFAULT_THREAD
from memory_graph_agent.validation import ThreadOwnershipError, check_id, limits_of, validate_turn


async def load_profile(state: State, runtime: Runtime[Context]) -> dict:
    """Validate the turn's new messages and load the profile of ``context.user_id``.

    This is the first node, so a rejected turn raises `InvalidInputError` before any
    node wrote anything. A thread belongs to the first user who wrote to it
    (``{prefix}:owner:{thread}``); another user's turn on it is rejected, so nobody
    reads someone else's conversation through a guessed thread id. "New" messages are
    those of the state not yet in the thread's Redis window (their ids are not in its
    seen-set): the caller's input, plus any message an earlier failed turn left in the
    checkpointed thread. Recent value changes of the profile go to ``profile_changes``.
    """
    ctx = runtime.context
    user_id = check_id(ctx.user_id, "user_id")
    configurable = get_config().get("configurable", {})
    thread_id = check_id(str(configurable.get("thread_id") or DEFAULT_THREAD), "thread_id")
    messages = state.get("messages") or []
    max_chars, max_messages = limits_of(ctx)
    end = bool(state.get("end_session"))  # a session end may carry no message at all
    validate_turn(
        messages, messages[-1:], max_chars=max_chars, max_messages=max_messages, end_session=end
    )
    services = await get_services(ctx.embedding_model)
    seen_key = f"{services.window.prefix}:seen:{user_id}:{thread_id}"
    owner_key = f"{services.window.prefix}:owner:{thread_id}"
    try:
        async with services.redis.pipeline(transaction=False) as pipe:
            pipe.set(owner_key, user_id, nx=True)
            pipe.get(owner_key)
            pipe.smismember(seen_key, ["", *(m.id for m in messages)])  # "": never empty
            _, owner, (_, *stored) = await pipe.execute()
        if owner != user_id:
            raise ThreadOwnershipError(
                f"thread {thread_id!r} belongs to another user; use a thread id of your own",
                [m.id for m, is_stored in zip(messages, stored, strict=True) if not is_stored],
            )
        new = [m for m, is_stored in zip(messages, stored, strict=True) if not is_stored]
        # A session end archives; a turn that brings a new user message is answered,
        # whatever ``end_session`` an earlier, failed run left in the checkpoint.
        end = end and not any(isinstance(m, HumanMessage) for m in new)
        validate_turn(
            messages, new, max_chars=max_chars, max_messages=max_messages, end_session=end
        )
        profile = await services.profile.get(user_id)
        changes = await services.profile.recent_changes(user_id, ctx.change_note_days)
        outages.ok("redis")
    except REDIS_DOWN as exc:  # answer without the profile rather than not at all
        outages.failed("redis", exc)
        return {
            "profile": {},
            "profile_changes": [],
            "memory_decisions": [],
            "memory_events": ["profile: Redis unavailable, none loaded"],
        }
    event = f"profile: {len(profile)} facts loaded"
    if changes:
        event += f", {len(changes)} recent changes noted"
    return {
        "profile": profile,
        "profile_changes": changes,
        "memory_decisions": [],  # per-turn, like memory_events
        "memory_events": [event],
        "end_session": end,
    }
