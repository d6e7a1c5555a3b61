"""A ``create_agent`` agent with `MemoryMiddleware`, served by ``langgraph dev`` in a test.

No services are given: the middleware opens the server's (``REDIS_URL``/``DATABASE_URL``)
and its memory runs are background runs of the server's ``memory_agent`` graph. The
chat model is the purpose-keyed fake, registered by name so that the memory runs (in
the same server process) summarize with it too.
"""

from __future__ import annotations

from langchain.agents import create_agent

from memory_graph_agent import MemoryMiddleware
from memory_graph_agent.services.models import register_chat_model
from memory_graph_agent.settings import Settings
from memory_graph_agent.testing import ScriptedChatModel

model = ScriptedChatModel()
memory = MemoryMiddleware(
    model=register_chat_model("middleware-server", model),
    settings=Settings().override(window_size=2, summary_batch=2, memory_delay_s=0),
)
agent = create_agent(model, system_prompt="You are Bob.", middleware=[memory])
