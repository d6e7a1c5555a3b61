"""load_profile: read the user's profile (hard memory) from Redis into state."""

from __future__ import annotations

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from graph.context import Context
from graph.state import State
from stores.services import get_services


async def load_profile(state: State, runtime: Runtime[Context]) -> dict:
    """Validate the turn's input and load the profile of ``context.user_id``."""
    messages = state.get("messages") or []
    if not messages or not isinstance(messages[-1], HumanMessage):
        raise ValueError("a turn must end with a human message (role 'user' / 'human')")
    services = await get_services(runtime.context.embedding_model)
    profile = await services.profile.get(runtime.context.user_id)
    return {"profile": profile, "memory_events": [f"profile: {len(profile)} facts loaded"]}
