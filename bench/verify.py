"""The lost / duplicated check of a benchmark conversation.

After a run, every message that left a conversation's window must be in exactly one
summary's ``source_ids`` or still pending; `verify_conversation` counts the exceptions.
"""

from __future__ import annotations

from collections import Counter
from typing import Any


async def verify_conversation(services: Any, user_id: str, thread_id: str) -> dict[str, int]:
    """Every message that left the window is in exactly one summary, or still pending.

    ``lost``: left the window, in no summary and not pending. ``duplicated``: in two or
    more summaries, or in a summary and still pending. ``foreign``: a summary cites an
    id this thread never pushed or that is still in the window.
    """
    seen = set(await services.redis.smembers(services.keys.thread("seen", user_id, thread_id)))
    window = {m.id for m in await services.window.window(user_id, thread_id)}
    pending_list = [m.id for _, m in await services.window.pending(user_id, thread_id)]
    pending = set(pending_list)
    summaries = [
        s
        for s in await services.memories.list(user_id, kind="summary", limit=10**7)
        if s.thread_id == thread_id
    ]
    counts = Counter(sid for s in summaries for sid in s.source_ids)
    left = seen - window
    lost = left - pending - set(counts)
    duplicated = {m for m, c in counts.items() if c > 1} | (pending & set(counts))
    duplicated |= {m for m, c in Counter(pending_list).items() if c > 1}
    foreign = set(counts) - left
    return {
        "pushed": len(seen),
        "in_window": len(window),
        "left_window": len(left),
        "summarized": len(set(counts) & left),
        "pending": len(pending),
        "summaries": len(summaries),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "foreign": len(foreign),
    }
