"""State of the ``maintenance`` graph: whose memories to tidy, and what was done."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict


class MaintenanceInput(TypedDict, total=False):
    """What a caller (CLI, cron) passes in.

    Attributes:
        user_id: Maintain this user only (default: the run context's ``user_id``).
        all_users: Maintain every user that has memories (overrides ``user_id``).
        dry_run: Report what would be done without changing anything.
    """

    user_id: str
    all_users: bool
    dry_run: bool


class MaintenanceState(MaintenanceInput, total=False):
    """Full state: each node appends what it did to its own key.

    Attributes:
        users: The users selected for this run.
        archived: Threads idle for ``idle_thread_days`` (``user_id``, ``thread_id``,
            ``idle_since``): ``action`` ``archived`` (their window summarized, ``messages``
            of them, and their window, seen-set and running summary deleted; on a dry run,
            would be) or ``held`` with a ``reason``.
        idle_threads: How idle threads were treated this run (``idle for N days``, or off).
        expired: Memories removed because their expiry passed (``id``, ``user_id``,
            ``kind``, ``importance``, ``text``).
        evicted: Memories removed for low importance and old age (same fields).
        compacted: Near-duplicate memories marked superseded (same fields plus
            ``kept``, the id of the memory that stays, and ``similarity``).
        pruned: Threads whose old checkpoints were removed (``action: pruned``) or held
            whole (``action: held``, ``reason``): ``id``, ``user_id``, ``thread_id`` (the
            conversation) and ``kind`` (``conversation`` or ``memory``).
        retention: How checkpoints were kept this run (``keep_latest``, or why not).
        decisions: Per user with old decisions: ``user_id``, ``pruned`` (how many were
            deleted, or would be on a dry run), ``held_threads`` (threads whose decisions
            were kept for their pending memory work) and ``before`` (the cut-off).
        decision_retention: How decisions were kept this run (``older than N days``, or off).
        report: Counts per action and per user, written last.
    """

    users: list[str]
    archived: list[dict[str, Any]]
    idle_threads: str
    expired: list[dict[str, Any]]
    evicted: list[dict[str, Any]]
    compacted: list[dict[str, Any]]
    pruned: list[dict[str, Any]]
    retention: str
    decisions: list[dict[str, Any]]
    decision_retention: str
    report: dict[str, Any]
