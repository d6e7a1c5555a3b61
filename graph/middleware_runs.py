"""Whose memory a `MemoryMiddleware` run is, and what the run chose: read from its context.

The user is the authenticated identity of a LangGraph server run, else the run's
``context.user_id`` (an object or a dict); a run that names none is refused with
`MissingUserError`, so nothing is ever written under a default user. The run's choices
(`RUN_CHOICES`) are read when its context has them: they mean what they mean in our graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from langchain.tools import ToolRuntime
from langgraph.config import get_config
from langgraph.runtime import Runtime

from graph.context import Context
from memory_graph_agent.turn.validation import InvalidInputError, check_id

HOW_TO_PASS_THE_USER = (
    "MemoryMiddleware needs the id of the user whose memory this run reads and writes. "
    "Pass it in the run's context: create_agent(..., context_schema=YourContext) with a "
    "user_id field and agent.ainvoke(..., context=YourContext(user_id='ada')) (a dict "
    "{'user_id': 'ada'} works too), or serve the agent with authentication on a LangGraph "
    "server, where the user is the authenticated identity. Nothing was written."
)
UNSET_USER = next((f.default for f in fields(Context) if f.name == "user_id"), None)
"""`Context`'s placeholder user: refused, so that nothing lands under a shared default."""
RUN_CHOICES = ("recall_mode", "memory_tools")
"""The run's `Context` fields the middleware reads from a run's context, when it has them."""


class MissingUserError(InvalidInputError):
    """The run named no user: the middleware refuses to read or write anyone's memory."""


def run_choices(runtime: Runtime[Any] | ToolRuntime[Any]) -> dict[str, Any]:
    """The `RUN_CHOICES` the run's context (an object or a dict) names."""
    context = runtime.context
    if isinstance(context, Mapping):
        return {name: context[name] for name in RUN_CHOICES if name in context}
    return {name: getattr(context, name) for name in RUN_CHOICES if hasattr(context, name)}


def user_of(runtime: Runtime[Any] | ToolRuntime[Any]) -> str:
    """The run's user: the authenticated identity of a server run, else ``context.user_id``.

    Raises `MissingUserError` when neither names one, `InvalidInputError` for an id that
    is not 1-64 of ``[A-Za-z0-9_.@-]``, or for a context naming another user than the
    authenticated one.
    """
    context = runtime.context
    claimed = context.get("user_id") if isinstance(context, Mapping) else None
    claimed = claimed or getattr(context, "user_id", None)
    auth = (
        (runtime.config if isinstance(runtime, ToolRuntime) else get_config())
        .get("configurable", {})
        .get("langgraph_auth_user")
    )
    identity = auth.get("identity") if isinstance(auth, Mapping) else getattr(auth, "identity", "")
    if identity and claimed and claimed != identity:
        raise InvalidInputError(
            f"user_id {claimed!r} in the context is not the authenticated user; "
            "leave user_id out or pass your own"
        )
    user = identity or claimed
    if not user or user == UNSET_USER:
        raise MissingUserError(HOW_TO_PASS_THE_USER)
    return check_id(user, "user_id")
