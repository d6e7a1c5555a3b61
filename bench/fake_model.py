"""The benchmarks' chat model: the project's scripted fake, timed per node.

`InstantChatModel` is `tests.fakes.ScriptedChatModel` (answers by the
call's declared purpose, instantly, with the same default answers the tests get), plus
the timing of each call as ``model:<node>`` in the running turn's record
(`bench.timing`), so a turn measures the graph and the memory, not a model. It keeps no
record of prompts (a benchmark makes thousands of calls).
"""

from __future__ import annotations

import time
import uuid

from bench.timing import CURRENT_NODE, record_part
from memory_graph_agent.models import register_chat_model
from tests.fakes import ScriptedChatModel


class InstantChatModel(ScriptedChatModel):
    """The scripted fake; each call is timed as ``model:<node>``."""

    record: bool = False

    async def ainvoke(self, input, config=None, **kwargs):  # noqa: ANN001, ANN201, A002
        """Time the whole LangChain call (callbacks included): that is the model's cost."""
        start = time.perf_counter()
        try:
            return await super().ainvoke(input, config, **kwargs)
        finally:
            record_part(f"model:{CURRENT_NODE.get() or '?'}", time.perf_counter() - start)


def register_instant_model() -> tuple[str, InstantChatModel]:
    """Register a fresh `InstantChatModel`; returns (``registered:...`` spec, model)."""
    model = InstantChatModel()
    return register_chat_model(f"bench-instant-{uuid.uuid4().hex[:8]}", model), model
