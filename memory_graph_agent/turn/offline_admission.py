"""Admission while Redis is down: the thread's owner and the new messages, from elsewhere.

Redis keeps who owns a thread and which messages are stored. Without it the owner is the
first writer of the episodic log (Postgres) or, failing that, the first user this process
buffered for the thread; "stored" means logged in Postgres or buffered here. Fails closed:
with Postgres down too, a thread that holds more than this turn is not admitted.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AnyMessage

from memory_graph_agent.services.stores import Services
from memory_graph_agent.storage.failsafe import rejected_while_down, window_buffer
from memory_graph_agent.storage.outages import StoreUnavailable
from memory_graph_agent.storage.threads import Admission


class OwnerUnknownError(RuntimeError):
    """Neither Redis nor Postgres could tell who owns the thread; the message is kept."""


async def admit_without_redis(
    services: Services, user_id: str, thread_id: str, messages: Sequence[AnyMessage]
) -> Admission:
    """`ThreadOwners.admit`'s answer, from Postgres and this process, for ``user_id``."""
    ids = [m.id for m in messages]
    buffered_by = window_buffer.users_of(thread_id)
    try:
        owner = await services.episodes.first_writer(thread_id)
        owner = owner or (buffered_by[0] if buffered_by else user_id)
        logged = await services.episodes.messages(owner, thread_id, ids)
    except StoreUnavailable as exc:
        if exc.service != "postgres":
            raise
        owner = buffered_by[0] if buffered_by else user_id
        logged = []
        if not buffered_by and len(ids) > 1:
            raise OwnerUnknownError(
                f"thread {thread_id!r} cannot be checked while Redis and Postgres are both "
                "unavailable; your message was kept, retry when they are back"
            ) from None
    stored = {m.id: m for m in [*logged, *window_buffer.messages(owner, thread_id)]}
    rejected = rejected_while_down.of(thread_id)
    return Admission(
        owner=owner,
        unseen=[i for i in ids if i not in stored],
        rejected=[i for i in ids if i in rejected],
        stored=stored,
        exact=False,
    )


def reject_without_redis(thread_id: str, ids: list[str]) -> None:
    """Remember a rejected turn's ids in this process until Redis can record them."""
    rejected_while_down.add(thread_id, ids)


async def record_rejections(services: Services, thread_id: str) -> None:
    """Hand the rejections this process kept while Redis was down over to Redis."""
    if ids := rejected_while_down.of(thread_id):
        await services.threads.reject(thread_id, sorted(ids))
        rejected_while_down.forget(thread_id, ids)
