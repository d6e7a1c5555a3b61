"""The ids of memory threads: the server threads a conversation's memory runs live on.

A memory thread's id is derived from its user and conversation thread, so every process
of a deployment finds the same one. It is a UUID (server thread ids are UUIDs) that is
*marked*: version 8 (RFC 9562's custom layout) with `TAG` in its first four bytes. No
client ever needs to create such a thread, so the server's auth refuses any client
request that would create one, whoever it names (`is_memory_thread_id`): nobody can
occupy another user's memory thread before its first memory run (issue 33). With
``MEMORY_THREAD_SECRET`` set (the same in every process of a deployment), the ids are an
HMAC under it, so nobody without it can even work out which id belongs to whom;
changing it moves memory runs to new threads (the old ones hold nothing memory needs:
its work waits in Redis).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import uuid

TAG = bytes.fromhex("6d656d72")  # "memr"
ALTERNATES = 3
"""Ids a conversation's memory runs may use, tried in order when one is taken (`attempt`)."""


def memory_thread_id(user_id: str, thread_id: str, attempt: int = 0) -> str:
    """The id of ``thread_id``'s memory thread for ``user_id``; ``attempt`` > 0: an alternate.

    A scheduler tries ``attempt`` 0, 1, ... in order, so every process picks the same
    one; an alternate is only needed where a thread was created outside the auth rules
    (authentication off, or before those rules).
    """
    if not 0 <= attempt < ALTERNATES:
        raise ValueError(f"attempt must be in [0, {ALTERNATES}), got {attempt}")
    salt = f"\n{attempt}" if attempt else ""
    message = f"memory-thread\n{user_id}\n{thread_id}{salt}".encode()
    secret = os.environ.get("MEMORY_THREAD_SECRET", "")
    if secret:
        digest = hmac.new(secret.encode(), message, hashlib.sha256).digest()
    else:
        digest = hashlib.sha256(message).digest()
    raw = bytearray(TAG + digest[: 16 - len(TAG)])
    raw[6] = 0x80 | (raw[6] & 0x0F)  # version 8
    raw[8] = 0x80 | (raw[8] & 0x3F)  # RFC 9562 variant
    return str(uuid.UUID(bytes=bytes(raw)))


def is_memory_thread_id(value: object) -> bool:
    """Whether ``value`` (a UUID or its text) is in the memory threads' id space."""
    try:
        parsed = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError:
        return False
    return parsed.bytes[: len(TAG)] == TAG and parsed.version == 8
