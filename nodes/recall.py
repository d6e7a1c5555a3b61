"""recall: put the user's relevant long-term memories in the prompt, per ``recall_mode``.

Runs beside ``load_profile`` in the turn's first step (its embedding and searches overlap
the profile's reads); it writes nothing but state, so a turn ``load_profile`` refuses
leaves no trace of it. A session end does not come here.

The query's embedding was started with the run and reaches it in the run's config
(`graph.context.query_vector`), when it could be.
The modes are `memory_graph_agent.recall.modes.recall_memories`; ``tool`` mode falls back to
``auto`` for a model that cannot call tools. Recall fills what the window the prompt
shows leaves of ``memory_token_budget``, so window and memories keep within it together.
Items keep their score parts (seen in Studio).

What is on screen (not recalled again) and the budget are `prompting.screen`'s, told
once the search has read the thread's Redis window beside it: a message
``load_profile``, beside it, takes out of the state (a thread archived while idle,
another user's rejected turn) is not in the thread's Redis window, so it is off screen.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph.context import Context, current_thread_id, query_vector
from graph.state import State, turn_start
from memory_graph_agent.core.records import event
from memory_graph_agent.prompting.rendering import latest_human_text
from memory_graph_agent.prompting.screen import Screen
from memory_graph_agent.recall.modes import recall_memories
from memory_graph_agent.services.models import load_chat_model, supports_tool_calling
from memory_graph_agent.services.stores import Services
from memory_graph_agent.settings import Settings


async def recall(
    state: State,
    runtime: Runtime[Context],
    *,
    services: Services,
    settings: Settings,
) -> dict:
    """Fill ``recalled`` for this turn according to ``recall_mode``."""
    ctx = runtime.context
    mode, events = ctx.recall_mode, []
    if mode == "tool" and not supports_tool_calling(load_chat_model(ctx.model)):
        mode = "auto"
        text = f"recall: model {ctx.model!r} cannot call tools, tool mode falls back to auto"
        events.append(event("recall", "tool_fallback", text))
    messages = state["messages"]
    screen = Screen(settings.window.memory_token_budget, messages)  # read beside the search
    query = latest_human_text(messages)
    items, found = await recall_memories(
        services, settings, ctx, mode, query, current_thread_id(), screen,
        screen.of(None).budget, query_vector(query),
    )  # fmt: skip
    return {"recalled": items, "memory_events": turn_start(events + found)}
