"""respond: answer with profile, recalled memories and thread summary in the prompt."""

from __future__ import annotations

from langchain_core.messages import SystemMessage
from langgraph.runtime import Runtime

from graph import metrics
from graph.context import Context
from graph.models import load_chat_model
from graph.prompts import SYSTEM_PROMPT
from graph.state import State
from graph.utils import defang, now_iso, render_memories, render_profile


class ModelUnavailableError(RuntimeError):
    """The chat model could not answer; the user's message stays in the thread state."""


def build_system_prompt(state: State) -> str:
    """Profile first, then recalled memories, then the running summary: all as data."""
    return SYSTEM_PROMPT.format(
        profile=render_profile(state.get("profile") or {}),
        memories=render_memories(state.get("recalled") or []),
        summary=defang(state.get("thread_summary") or "(none)"),
        today=now_iso()[:10],  # date only: keeps the prompt prefix cacheable all day
    )


async def respond(state: State, runtime: Runtime[Context]) -> dict:
    """Call the chat model on the system prompt followed by the window messages."""
    model = load_chat_model(runtime.context.model)
    prompt = [SystemMessage(build_system_prompt(state)), *state["messages"]]
    metrics.record_prompt_hits(
        len(state["messages"]), state.get("recalled") or [], state.get("profile")
    )
    try:
        reply = await model.ainvoke(prompt)
    except Exception as exc:  # provider down, bad key, local model missing...
        raise ModelUnavailableError(
            f"chat model {runtime.context.model!r} is unavailable ({type(exc).__name__}: {exc}); "
            "your message was kept and will be answered with the next turn"
        ) from exc
    return {"messages": [reply]}
