"""The `Auth` object ``langgraph.json`` registers: who calls, and what they may touch.

``langgraph dev`` and the LangGraph server load ``auth`` from this file at start and call
`authenticate` on every request (custom routes too: ``enable_custom_route_auth``), then
the most specific ``@auth.on`` handler of each operation. Handlers stamp
``metadata.owner`` on what a caller creates and return the owner filter every read is
checked against; anything without a handler is refused (`deny_unlisted`). The rules
themselves are in `memory_graph_agent.auth.policy`.

With ``MEMORY_AGENT_AUTH=off`` every request is the local admin, runs keep the client's
``user_id`` and the server logs a warning at start: for a single-user laptop only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from langgraph_sdk import Auth

from memory_graph_agent.auth.credentials import AuthFailed, Verifier, auth_enabled
from memory_graph_agent.auth.policy import (
    ADMIN,
    MEMORY_OF,
    Forbidden,
    assistants_filter,
    check_graph,
    check_memory_thread,
    claim,
    is_maintenance,
    keep_owner,
    maintenance_input,
    owner_filter,
    run_context,
)
from memory_graph_agent.core.memory_threads import is_memory_thread_id

logger = logging.getLogger(__name__)

ENABLED = auth_enabled()
VERIFIER = Verifier.from_env() if ENABLED else None
LOCAL_USER = "local-admin"
AUTH_OFF_WARNING = (
    "MEMORY_AGENT_AUTH=off: AUTHENTICATION IS DISABLED. Anyone who can reach this server "
    "can claim any user_id and read that user's memories. Use this only on a single-user "
    "machine; set MEMORY_AGENT_API_KEYS (or MEMORY_AGENT_JWT_SECRET) anywhere else."
)
if not ENABLED:
    logger.warning("\n%s\n%s\n%s", "!" * 80, AUTH_OFF_WARNING, "!" * 80)

auth = Auth()

Value = MutableMapping[str, Any]
Filter = dict[str, Any] | None


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes] | dict[str, str]) -> Auth.types.MinimalUserDict:
    """The caller's identity from its API key or JWT; 401 without valid credentials."""
    if VERIFIER is None:
        return {"identity": LOCAL_USER, "permissions": [ADMIN]}
    try:
        identity = VERIFIER.identify(headers)
    except AuthFailed as exc:
        raise Auth.exceptions.HTTPException(status_code=401, detail=str(exc)) from None
    return {"identity": identity.user_id, "permissions": sorted(identity.roles)}


def _caller(ctx: Auth.types.AuthContext) -> tuple[str, frozenset[str]]:
    user_id = ctx.user.identity
    roles = frozenset(ctx.permissions)
    if VERIFIER is not None:  # a cron's run carries only its user id
        roles |= VERIFIER.roles_of(user_id)
    return user_id, roles


@contextmanager
def _forbidden_is_403() -> Iterator[None]:
    try:
        yield
    except Forbidden as exc:
        raise Auth.exceptions.HTTPException(status_code=403, detail=str(exc)) from None


@auth.on
async def deny_unlisted(ctx: Auth.types.AuthContext, value: Any) -> bool:
    """Refuse any resource or action that has no rule below (fail closed)."""
    return not ENABLED


def _check_claims(
    kwargs: Value,
    assistant_id: object,
    user_id: str,
    roles: frozenset[str],
    thread_id: object = None,
) -> None:
    """Refuse another user's id or a deployment setting; rewrite a maintenance input."""
    if is_maintenance(assistant_id):
        kwargs["input"] = maintenance_input(
            user_id, roles, kwargs.get("input"), kwargs.get("command")
        )
    run_context(user_id, kwargs.get("context"), thread_id)
    # the legacy configurable: the server makes it the context when there is none
    run_context(user_id, (kwargs.get("config") or {}).get("configurable"), thread_id)


@auth.on.threads.create
async def create_thread(ctx: Auth.types.AuthContext, value: Value) -> Filter:
    """A new thread belongs to its creator (a copy keeps the metadata of its original).

    The filter matters: with ``if_exists="do_nothing"`` the server returns an existing
    thread of that id, values included, unless it fails the filter (409).
    """
    if not ENABLED:
        return None
    with _forbidden_is_403():
        check_memory_thread(value.get("thread_id"), value.get("metadata"), ctx.user.identity)
        if value.get("metadata") is not None:
            claim(value["metadata"], ctx.user.identity)
    return owner_filter(ctx.user.identity)


@auth.on.threads.create_run
async def create_run(ctx: Auth.types.AuthContext, value: Value) -> Filter:
    """Runs use the caller's user id, on the caller's threads only.

    The engines hand the request over in two shapes, adapted here and nowhere else. The
    LangGraph server nests the run's fields in ``kwargs``, applies edits made in place and
    takes a returned dict as the owner filter. Aegra passes them flat (``metadata`` may be
    None) and takes a returned dict's ``context`` and ``config`` as the run's; it checks a
    thread's owner itself (its threads carry the creator's ``user_id``).
    """
    if not ENABLED:
        return None
    user_id, roles = _caller(ctx)
    nested = "kwargs" in value  # the LangGraph server's shape
    kwargs = value["kwargs"] if nested else value
    thread_id = value.get("thread_id")
    sent = kwargs.get("input")
    with _forbidden_is_403():
        if thread_id is not None and is_memory_thread_id(thread_id):
            check_memory_thread(thread_id, value.get("metadata"), user_id)
        _check_claims(kwargs, value.get("assistant_id"), user_id, roles, thread_id)
        # the graph builds its Context from the run's context: the caller, never the client
        kwargs["context"] = run_context(user_id, kwargs.get("context"), thread_id)
        if value.get("metadata") is not None:
            claim(value["metadata"], user_id)  # a thread this run creates is the caller's
        if not nested and kwargs.get("input") != sent:  # Aegra cannot take a rewritten input
            raise Forbidden(f"on this server, send the maintenance input as {kwargs['input']!r}")
    if not nested:  # Aegra: the returned context replaces the client's
        return {"context": kwargs["context"]}
    return owner_filter(user_id)


@auth.on.threads.update
async def update_thread(ctx: Auth.types.AuthContext, value: Value) -> Filter:
    """Update, cancel or edit the state of one's own threads; never give one away."""
    if not ENABLED:
        return None
    with _forbidden_is_403():
        if MEMORY_OF in (value.get("metadata") or {}):
            raise Forbidden(f"metadata.{MEMORY_OF} is set by the server, not changed")
        keep_owner(value.get("metadata"), ctx.user.identity)
    return owner_filter(ctx.user.identity)


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: Value) -> Filter:
    """Read, list, stream, join and delete: one's own threads and their runs only."""
    return owner_filter(ctx.user.identity) if ENABLED else None


@auth.on.assistants.create
async def create_assistant(ctx: Auth.types.AuthContext, value: Value) -> None:
    """Assistants belong to their creator and cannot preset another user's id."""
    if ENABLED:
        user_id, roles = _caller(ctx)
        with _forbidden_is_403():
            check_graph(value.get("graph_id"), roles)
            _check_claims(value, None, user_id, roles)
            claim(value["metadata"], user_id)


@auth.on.assistants.update
async def update_assistant(ctx: Auth.types.AuthContext, value: Value) -> Filter:
    """Only one's own assistants; the same rules as at creation."""
    if not ENABLED:
        return None
    user_id, roles = _caller(ctx)
    with _forbidden_is_403():
        check_graph(value.get("graph_id"), roles)
        _check_claims(value, None, user_id, roles)
        keep_owner(value.get("metadata"), user_id)
    return owner_filter(user_id)


@auth.on.assistants
async def own_assistants(ctx: Auth.types.AuthContext, value: Value) -> Filter:
    """Read and search one's own and the server's assistants; delete one's own."""
    if not ENABLED:
        return None
    if ctx.action == "delete":
        return owner_filter(ctx.user.identity)
    return assistants_filter(ctx.user.identity)


@auth.on.crons.create
async def create_cron(ctx: Auth.types.AuthContext, value: Value) -> None:
    """A cron's runs follow the run rules, checked now and again each time it fires.

    Aegra passes the cron's fields flat (no ``payload``), ignores edits, and fires its
    runs from the payload as sent, without the run rules: there, the context must
    already name the caller and a maintenance input must need no rewrite.
    """
    if ENABLED:
        user_id, roles = _caller(ctx)
        nested = "payload" in value  # the LangGraph server's shape
        payload = value["payload"] if nested else value
        sent = payload.get("input")
        with _forbidden_is_403():
            _check_claims(payload, payload.get("assistant_id"), user_id, roles)
            if not nested:
                _runs_as_sent(payload, sent, user_id)
            if value.get("metadata") is not None:
                claim(value["metadata"], user_id)


def _runs_as_sent(payload: Value, sent: object, user_id: str) -> None:
    """Aegra fires a cron's runs as sent: refuse what the run rules would have to change."""
    if (payload.get("context") or {}).get("user_id") != user_id:
        raise Forbidden(f"on this server, a cron's context must name its user: {user_id!r}")
    if payload.get("input") != sent:
        raise Forbidden(f"on this server, send the maintenance input as {payload['input']!r}")


@auth.on.crons.update
async def update_cron(ctx: Auth.types.AuthContext, value: Value) -> Filter:
    """Only one's own crons; a new payload follows the run rules.

    Aegra passes an update flat, without the cron's assistant, and fires what it stores
    unchecked: there, a cron's input, context and config stay as created.
    """
    if not ENABLED:
        return None
    user_id, roles = _caller(ctx)
    with _forbidden_is_403():
        if "payload" not in value and value.keys() & {"input", "context", "config", "command"}:
            raise Forbidden("on this server, a cron's payload is fixed: create another cron")
        if payload := value.get("payload"):
            _check_claims(payload, payload.get("assistant_id"), user_id, roles)
        keep_owner(value.get("metadata"), user_id)
    return owner_filter(user_id)


@auth.on.crons
async def own_crons(ctx: Auth.types.AuthContext, value: Value) -> Filter:
    """Read, search and delete one's own crons."""
    return owner_filter(ctx.user.identity) if ENABLED else None


@auth.on.store
async def own_namespace(ctx: Auth.types.AuthContext, value: Value) -> None:
    """The LangGraph store (unused by the graphs) is scoped to the caller's namespace."""
    if ENABLED:
        namespace = tuple(value.get("namespace") or ())
        if not namespace or namespace[0] != ctx.user.identity:
            value["namespace"] = (ctx.user.identity, *namespace)
