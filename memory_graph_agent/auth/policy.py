"""The authorization rules of the server, as pure functions of the caller and the request.

- A run's ``user_id`` is the caller's: a ``context.user_id`` naming someone else is
  refused, a missing one is filled in.
- A run's context is `graph.context.Context`: what a client chooses per run. The
  deployment's settings (`memory_graph_agent.settings.Settings`: limits, budgets,
  batches, timeouts, thresholds, modes, weights) never travel with a run; a context or
  ``configurable`` that names one (``window_size``, a group such as ``recall``) is refused
  with the environment variable that sets it, so a client is not silently ignored.
- Threads, runs, crons and assistants carry ``metadata.owner``; every read is filtered by
  it, and nobody may hand a resource to someone else.
- Memory threads (`memory_graph_agent.core.memory_threads`) are created only as the
  caller's own memory thread of a conversation they name in ``metadata.memory_of``:
  nobody can occupy, or pose as, someone else's.
- The ``maintenance`` graph for other users (or all of them), forgetting another user
  and maintenance assistants need the ``admin`` role.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any
from uuid import UUID, uuid5

from graph.context import CONTEXT_FIELDS
from memory_graph_agent.core.memory_threads import (
    ALTERNATES,
    is_memory_thread_id,
    memory_thread_id,
)
from memory_graph_agent.settings import ENV_PATHS

ADMIN = "admin"
OWNER = "owner"
MEMORY_OF = "memory_of"
MAINTENANCE_GRAPH = "maintenance"
# How the LangGraph server names the assistant it creates for each graph of
# langgraph.json (langgraph_api.graph.NAMESPACE_GRAPH; a server test checks it).
NAMESPACE_GRAPH = UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
MAINTENANCE_ASSISTANT_ID = uuid5(NAMESPACE_GRAPH, MAINTENANCE_GRAPH)


class Forbidden(Exception):
    """The caller is authenticated but may not do this (403)."""


def is_admin(roles: Iterable[str]) -> bool:
    """Whether the roles include ``admin``."""
    return ADMIN in set(roles)


def owner_filter(user_id: str) -> dict[str, str]:
    """The metadata filter that limits every read to the caller's own resources."""
    return {OWNER: user_id}


def assistants_filter(user_id: str) -> dict[str, Any]:
    """Own assistants, plus the ones the server made for the graphs of langgraph.json."""
    return {"$or": [{OWNER: user_id}, {"created_by": "system"}]}


def claim(metadata: MutableMapping[str, Any], user_id: str) -> None:
    """Stamp the caller as owner of a resource being created (refuse naming another)."""
    owner = metadata.get(OWNER)
    if owner is not None and owner != user_id:
        raise Forbidden(f"metadata.owner must be the caller ({user_id!r}), not {owner!r}")
    metadata[OWNER] = user_id


def keep_owner(metadata: Mapping[str, Any] | None, user_id: str) -> None:
    """An update may not give a resource to someone else."""
    owner = (metadata or {}).get(OWNER)
    if owner is not None and owner != user_id:
        raise Forbidden(f"metadata.owner cannot be changed to {owner!r}")


def check_memory_thread(
    thread_id: object, metadata: Mapping[str, Any] | None, user_id: str
) -> None:
    """Refuse creating a memory thread that is not the caller's own.

    A thread in the memory threads' id space, or marked ``metadata.memory_of``, must be
    ``user_id``'s own memory thread of the conversation that ``memory_of`` names.
    """
    memory_of = (metadata or {}).get(MEMORY_OF)
    if memory_of is None and (thread_id is None or not is_memory_thread_id(thread_id)):
        return
    own = _memory_threads(user_id, memory_of) if isinstance(memory_of, str) and memory_of else set()
    if thread_id is None or str(thread_id) not in own:
        raise Forbidden(
            "memory threads are created by the server for the caller's own conversations: "
            f"this thread id or metadata.{MEMORY_OF} is not yours to use"
        )


def _memory_threads(user_id: str, memory_of: str) -> set[str]:
    """The ids a memory run of ``user_id``'s thread ``memory_of`` may run on."""
    return {memory_thread_id(user_id, memory_of, n) for n in range(ALTERNATES)}


def run_context(
    user_id: str, context: Mapping[str, Any] | None, thread_id: object = None
) -> dict[str, Any]:
    """The run's context with ``user_id`` set to the caller.

    Refused: another user id and any name of a deployment setting (`DEPLOYMENT_NAMES`).
    Other keys set nothing (the server passes a run only the keys of `Context`, and adds
    some of its own to ``configurable``, e.g. a fired cron's ``cron_id``).
    The one exception is ``memory_of`` on a run of the memory thread of that thread of the
    caller's: the run the server's memory scheduler starts (`graph.background`).
    """
    context = dict(context or {})
    _check_user_id(user_id, context)
    memory_of = context.pop("memory_of", None)
    if memory_of is not None and (
        not memory_of or str(thread_id) not in _memory_threads(user_id, str(memory_of))
    ):
        raise Forbidden("context.memory_of is set by the memory scheduler on its own runs only")
    refuse_deployment_settings(context, "context")
    context["user_id"] = user_id
    if memory_of is not None:
        context["memory_of"] = memory_of
    return context


def _check_user_id(user_id: str, context: Mapping[str, Any]) -> None:
    claimed = context.get("user_id")
    if claimed not in (None, "") and claimed != user_id:
        raise Forbidden(
            f"context.user_id {str(claimed)[:64]!r} is not the authenticated user "
            f"({user_id!r}); omit it, the server fills it in"
        )


def _deployment_names() -> dict[str, list[str]]:
    """Each name of a deployment setting, and the environment variables that set it."""
    names = {env.lower(): [env] for env in ENV_PATHS}
    for env, path in ENV_PATHS.items():
        for group in {path[0], "recall_weights" if path[:2] == ("recall", "weights") else ""}:
            names.setdefault(group, []).append(env)
    names.pop("", None)
    return names


DEPLOYMENT_NAMES = _deployment_names()
"""The names a run may not set: every setting of `Settings` by its variable's name in
lower case (``window_size``), its groups (``window``, ``recall``, ``recall_weights``...)."""


def refuse_deployment_settings(context: Mapping[str, Any], where: str) -> None:
    """Refuse (403) a run's ``context`` or ``configurable`` naming a deployment setting."""
    named = sorted(k for k in context if k in DEPLOYMENT_NAMES and k not in CONTEXT_FIELDS)
    if named:
        env = ", ".join(e for k in named for e in DEPLOYMENT_NAMES[k][:3])
        raise Forbidden(
            f"{where} sets {', '.join(named)}: a deployment setting, set by the deployment's "
            f"environment ({env}), never by a run; a run's context may set "
            f"{', '.join(sorted(CONTEXT_FIELDS - {MEMORY_OF}))}"
        )


def is_maintenance(assistant_id: object) -> bool:
    """Whether an assistant id (a graph name or the server's UUID for it) is ``maintenance``."""
    return str(assistant_id) in (MAINTENANCE_GRAPH, str(MAINTENANCE_ASSISTANT_ID))


def maintenance_input(
    user_id: str, roles: Iterable[str], run_input: object, command: object
) -> object:
    """The input a maintenance run may use; only admins touch other users.

    A non-admin's input is rewritten to name the caller and ``all_users: false``
    explicitly: the input overwrites those state keys, so a thread whose state was edited
    to ``all_users: true`` cannot carry it into the run. Commands are refused (the graph
    has no interrupt to resume) for the same reason.
    """
    if is_admin(roles):
        return run_input
    if command:
        raise Forbidden("maintenance runs take an input, not a command, unless you are admin")
    if not isinstance(run_input, Mapping):
        raise Forbidden("a maintenance run needs an input, e.g. {'dry_run': true}")
    if run_input.get("all_users"):
        raise Forbidden("maintenance for all users needs the admin role")
    target = run_input.get("user_id")
    if target not in (None, "") and target != user_id:
        raise Forbidden(f"maintenance for another user ({str(target)[:64]!r}) needs the admin role")
    return {**run_input, "user_id": user_id, "all_users": False}


def check_graph(graph_id: object, roles: Iterable[str]) -> None:
    """Only admins create or repoint assistants on the maintenance graph."""
    if graph_id == MAINTENANCE_GRAPH and not is_admin(roles):
        raise Forbidden("assistants of the maintenance graph need the admin role")


def check_forget(user_id: str, roles: Iterable[str], target: str) -> None:
    """Anyone may forget themself; forgetting another user needs the admin role."""
    if target != user_id and not is_admin(roles):
        raise Forbidden(f"forgetting another user ({target!r}) needs the admin role")
