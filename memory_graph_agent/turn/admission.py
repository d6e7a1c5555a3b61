"""Start of a turn: check the input and the thread's owner, then read the profile.

A thread belongs to the first user who wrote to it. "New" messages are those of the
state not yet in the owner's Redis window, or whose stored copy differs (re-sent under a
stored id), so a rejected turn raises before any write to memory
(but the claim of a free thread, and the ids of what it rejected).

A rejected turn's input is already in the thread's checkpoint (``add_messages`` wrote it
before the first node), and a node that raises cannot take it out. So whatever a turn is
refused for, another user's turn or input that breaks a rule, its ids go to
``rejected:{thread}``, and the thread's next admitted turn undoes it (its messages removed,
the owner's messages it replaced by id restored from the window): it never fails that turn
again, nor is it ever taken for the owner's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage

from memory_graph_agent.core.records import MemoryEvent, ProfileChange, event
from memory_graph_agent.core.run import RunContext
from memory_graph_agent.core.turns import ends_session
from memory_graph_agent.formation.summaries import rebuild_thread_summary
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings
from memory_graph_agent.storage.outages import StoreUnavailable
from memory_graph_agent.storage.threads import Admission
from memory_graph_agent.storage.window import StoredMessage
from memory_graph_agent.turn.offline_admission import (
    OwnerUnknownError,
    admit_without_redis,
    record_rejections,
    reject_without_redis,
)
from memory_graph_agent.turn.validation import (
    InvalidInputError,
    ThreadOwnershipError,
    check_id,
    validate_turn,
)


@dataclass
class TurnStart:
    """The profile to answer with, and whether this turn archives the session."""

    profile: dict[str, dict[str, Any]] = field(default_factory=dict)
    changes: list[ProfileChange] = field(default_factory=list)
    end_session: bool = False
    events: list[MemoryEvent] = field(default_factory=list)
    repairs: list[BaseMessage] = field(default_factory=list)  # state updates: drop, restore
    thread_summary: str | None = None  # the running summary; None: unreadable or Redis down


async def start_turn(
    services: Services,
    settings: Settings,
    ctx: RunContext,
    thread_id: str,
    messages: Sequence[AnyMessage],
    end_session: bool,
    *,
    read_profile: bool = True,
) -> TurnStart:
    """Validate the turn, admit the user to the thread, load their profile.

    The admission, the profile (with its recent changes) and the thread's running summary
    are read in one Redis round trip (`ThreadOwners.admit`'s ``also``). With
    ``read_profile=False`` the profile is left to the caller (a `MemoryProvider`).

    ``messages`` is every message of the checkpointed state, the turn's input last. Raises
    `InvalidInputError` for input that breaks a rule of `memory_graph_agent.turn.validation`
    (its messages are removed by the thread's next turn, which is not judged by them),
    `ThreadOwnershipError` when the thread belongs to another user (also while Redis is
    down: `memory_graph_agent.turn.offline_admission`, which raises `OwnerUnknownError` when
    nothing can tell the owner).
    """
    user_id = check_id(ctx.user_id, "user_id")
    check_id(thread_id, "thread_id")
    max_chars, max_messages = settings.limits.max_message_chars, settings.limits.max_turn_messages
    messages = list(messages)
    # the rule `graph.routing` routes this node and recall by (they run side by side)
    end_session = ends_session(messages, end_session)
    redis_up, replies = True, []
    reads = [
        *(services.profile.reads(user_id) if read_profile else []),
        services.window.thread_summary_read(user_id, thread_id),
    ]
    try:
        await record_rejections(services, thread_id)
        ids = [m.id for m in messages]
        admission = await services.threads.admit(user_id, thread_id, ids, also=reads)
        replies = admission.also
    except StoreUnavailable as exc:
        if exc.service != "redis":
            raise
        redis_up = False
        admission = await admit_without_redis(services, user_id, thread_id, messages)
    else:
        if admission.claimed and any(m.type == "ai" for m in messages):
            admission = await _verify_claim(services, user_id, thread_id, messages, admission)
    if admission.owner != user_id:
        # What this turn brought (unseen by the owner) is the intruder's, and so is any
        # message under an owner's id that differs from the owner's copy or has none (sent
        # again by id). All stay in the checkpoint: the owner's next turn removes them or
        # restores the owner's copy. Only the unseen are listed (`discard_rejected`).
        forged = [m.id for m in messages if _edited(m, admission)]
        await _reject(services, thread_id, forged, redis_up)
        raise ThreadOwnershipError(
            f"thread {thread_id!r} belongs to another user; use a thread id of your own",
            admission.unseen,
        )
    rejected = set(admission.rejected)
    # a rejected turn (another user's, or broken input): its messages go, the owner's it
    # replaced come back
    dropped = {m.id for m in messages if m.id in rejected and _edited(m, admission)}
    if not admission.exact:  # no restoring from the log's lossy copies: once Redis is back
        dropped -= admission.stored.keys()
    restored = {i: admission.stored[i].to_message() for i in dropped & admission.stored.keys()}
    if not end_session and messages and messages[-1].id in dropped - restored.keys():
        # a turn to answer (recall routed by the rejected message too) with nothing left: a
        # run without input, a session end, or the rejected id sent again (a Studio edit)
        raise InvalidInputError(
            "nothing to answer: the thread's last message was rejected by an earlier turn "
            "and is removed with the next new message; send one (a message sent again "
            "under a rejected message's id is still the rejected one)"
        )
    messages = [restored.get(m.id, m) for m in messages if m.id in restored or m.id not in dropped]
    archived = (
        await _archived(services, user_id, thread_id, messages, admission) if redis_up else set()
    )
    messages = [m for m in messages if m.id not in archived]
    unseen = set(admission.unseen) - dropped - archived
    new = [m for m in messages if m.id in unseen]
    # a stored id with other content (re-sent with its id: add_messages replaced it) is input
    edited = [m for m in messages if m.id not in unseen and _edited(m, admission)]
    try:
        validate_turn(
            messages,
            edited + new,
            max_chars=max_chars,
            max_messages=max_messages,
            end_session=end_session,
        )
    except InvalidInputError as exc:  # the next turn undoes it, as an intruder's
        await _reject(services, thread_id, exc.message_ids, redis_up)
        raise
    repairs = _repairs(dropped | archived, list(restored.values()))
    if not redis_up:
        return _without_redis(end_session, repairs)
    try:
        summary = await services.window.thread_summary_from(replies[-1])
        if archived and not summary:  # back to a thread archived while idle: its recap
            summary = await rebuild_thread_summary(services, user_id, thread_id)
    except StoreUnavailable:  # its key unreadable: the checkpoint's summary stays
        summary = None
    undone = []  # a rejected turn, taken out of the owner's thread
    if dropped:
        text = f"thread: {len(dropped)} messages of a rejected turn undone"
        undone.append(event("load_profile", "dropped_rejected", text))
    if archived:
        text = f"thread: {len(archived)} messages archived while it was idle left the state"
        undone.append(event("load_profile", "dropped_archived", text))
    if not read_profile:
        return TurnStart(
            end_session=end_session, events=undone, repairs=repairs, thread_summary=summary
        )
    try:
        profile, changes = await services.profile.from_reads(
            user_id, replies[:-1], settings.window.change_note_days
        )
    except StoreUnavailable:  # unreadable, or facts had expired and Redis failed moving them
        return _without_redis(end_session, repairs, summary)
    text = f"profile: {len(profile)} facts loaded"
    if changes:
        text += f", {len(changes)} recent changes noted"
    events = [event("load_profile", "loaded", text), *undone]
    return TurnStart(profile, changes, end_session, events, repairs, summary)


async def _archived(
    services: Services,
    user_id: str,
    thread_id: str,
    messages: list[AnyMessage],
    admission: Admission,
) -> set[str]:
    """Ids of the state's messages that memory already summarized: they leave the state.

    A thread archived while idle (`formation.idle_threads`) lost its window and seen-set,
    but its checkpoint still holds the last window. Normally every message of the state
    but the turn's new input is in the window, so the episodic log is asked only when
    more than one message is not, or one the seen-set knows is not (a turn that raced
    the archive). Postgres down: nothing is dropped (the turn goes on as before).
    """
    outside = [m.id for m in messages if m.id not in admission.stored]
    if len(outside) < 2 and set(outside) <= set(admission.unseen):
        return set()
    try:
        return await services.episodes.summarized(user_id, thread_id, outside)
    except StoreUnavailable as exc:
        if exc.service != "postgres":
            raise
        return set()


async def _verify_claim(
    services: Services,
    user_id: str,
    thread_id: str,
    messages: list[AnyMessage],
    claim: Admission,
) -> Admission:
    """Check the claim of a free thread that already has history.

    Its owner was lost (Redis data loss, or it was written while Redis was down): find
    them as if Redis were down, and give the thread back to them.
    """
    try:
        found = await admit_without_redis(services, user_id, thread_id, messages)
    except OwnerUnknownError:
        await services.threads.hand_over(thread_id, user_id, None)
        raise
    if found.owner == user_id:
        return claim
    await services.threads.hand_over(thread_id, user_id, found.owner)
    return found


async def _reject(services: Services, thread_id: str, ids: list[str], redis_up: bool) -> None:
    """Record the ids a rejected turn left in the checkpoint, for the next turn to undo."""
    if not ids:
        return
    if redis_up:
        try:
            await services.threads.reject(thread_id, ids)
            return
        except StoreUnavailable:
            pass
    reject_without_redis(thread_id, ids)


def _edited(message: AnyMessage, admission: Admission) -> bool:
    """Whether ``message`` differs from the stored copy under its id (or has none).

    Against the episodic log's copies (no tool calls) only role, name and text count.
    """
    kept = admission.stored.get(message.id)
    if kept is None or message.type != kept.role:
        return True
    mine = StoredMessage.from_message(message, ts=kept.ts)
    if not admission.exact:
        return (mine.name, mine.content) != (kept.name, kept.content)
    return mine != kept


def _repairs(dropped: set[str], restored: list[AnyMessage]) -> list[BaseMessage]:
    """Updates of ``messages`` undoing a rejected turn: removals, then the owner's copies."""
    kept = {m.id for m in restored}
    return [*(RemoveMessage(id=i) for i in sorted(dropped - kept)), *restored]


def _without_redis(
    end_session: bool, repairs: list[BaseMessage], thread_summary: str | None = None
) -> TurnStart:
    return TurnStart(
        end_session=end_session,
        events=[event("load_profile", "unavailable", "profile: Redis unavailable, none loaded")],
        repairs=repairs,
        thread_summary=thread_summary,
    )
