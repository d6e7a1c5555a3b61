"""respond: answer with profile, recalled memories and thread summary in the prompt."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from graph.context import Context
from graph.prompts import MEMORY_TOOLS_PROMPT, TOOL_LIMIT_REPLY, system_prompt
from graph.state import State
from graph.tools import tools_for
from memory_graph_agent.core import metrics
from memory_graph_agent.prompting.budgets import context_tokens, reply_budget
from memory_graph_agent.services.models import load_chat_model, supports_tool_calling
from memory_graph_agent.settings import Settings
from memory_graph_agent.turn.replying import answer


class ModelUnavailableError(RuntimeError):
    """The chat model could not answer; the user's message stays in the thread state."""


def tool_rounds_this_turn(messages: list[AnyMessage]) -> int:
    """AI tool-call messages since the turn's human message: the rounds already used."""
    rounds = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        rounds += isinstance(message, AIMessage) and bool(message.tool_calls)
    return rounds


async def respond(
    state: State,
    runtime: Runtime[Context],
    *,
    settings: Settings,
    tools: Sequence[BaseTool] = (),
) -> dict:
    """Call the chat model on the system prompt followed by the window messages.

    Tools loop ``respond → tools → respond`` for at most ``max_tool_rounds`` rounds; the
    last call binds no tools, so the turn ends with an answer.
    """
    ctx = runtime.context
    model = load_chat_model(ctx.model)
    rounds = tool_rounds_this_turn(state["messages"])
    offered = tools_for(ctx, tools) if rounds < settings.limits.max_tool_rounds else []
    offered = offered if offered and supports_tool_calling(model) else []
    system = system_prompt(state, settings.window.profile_token_budget)
    if offered:
        system += "\n\n" + MEMORY_TOOLS_PROMPT.format(tools=", ".join(t.name for t in offered))
    # Only the newest whole turns that fit the model's real context go out (the rest stays
    # in the window, compressed next); a turn too large on its own is shown cut.
    budget = reply_budget(context_tokens(settings, ctx.model))
    if rounds == 0:  # count what the turn put in the prompt once, not once per tool round
        metrics.record_prompt_hits(
            len(state["messages"]), state.get("recalled") or [], state.get("profile")
        )
    try:
        bound = model.bind_tools(offered) if offered else model
        reply, shown = await answer(bound, system, state["messages"], budget)
    except Exception as exc:  # provider down, bad key, local model missing...
        raise ModelUnavailableError(
            f"chat model {ctx.model!r} is unavailable ({type(exc).__name__}: {exc}); "
            "your message was kept and will be answered with the next turn"
        ) from exc
    if isinstance(reply, AIMessage) and reply.tool_calls and not offered:
        # Calls nobody will run would leave the thread with unanswered tool calls.
        reply = AIMessage(content=reply.content or TOOL_LIMIT_REPLY, id=reply.id, name=reply.name)
    return {"messages": [reply], "memory_events": shown.events}
