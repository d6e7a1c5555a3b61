"""respond: answer with profile, recalled memories and thread summary in the prompt."""

from __future__ import annotations

from langchain_core.messages import SystemMessage
from langgraph.runtime import Runtime

from graph import metrics
from graph.context import Context
from graph.models import load_chat_model
from graph.prompts import SYSTEM_PROMPT
from graph.state import State
from graph.utils import now_iso, render_memories, render_profile


def build_system_prompt(state: State) -> str:
    """Profile first, then recalled memories, then the running summary: all as data."""
    return SYSTEM_PROMPT.format(
        profile=render_profile(state.get("profile") or {}),
        memories=render_memories(state.get("recalled") or []),
        summary=state.get("thread_summary") or "(none)",
        today=now_iso()[:10],  # date only: keeps the prompt prefix cacheable all day
    )


async def respond(state: State, runtime: Runtime[Context]) -> dict:
    """Call the chat model on the system prompt followed by the window messages."""
    model = load_chat_model(runtime.context.model)
    prompt = [SystemMessage(build_system_prompt(state)), *state["messages"]]
    metrics.record_prompt_hits(
        len(state["messages"]), state.get("recalled") or [], state.get("profile")
    )
    reply = await model.ainvoke(prompt)
    return {"messages": [reply]}
