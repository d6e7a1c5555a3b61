"""The tests' fake chat model: `memory_graph_agent.testing`, re-exported under its old home.

`ScriptedChatModel` answers each call by its declared purpose (the ``prompt:<purpose>``
run tag; none means the reply); ``ScriptedChatModel(handler=f)`` makes ``f`` answer every
purpose, and ``f`` may fall back to `default_handler` for the purposes it does not script.
"""

from __future__ import annotations

from memory_graph_agent.testing import (
    DEFAULT_HANDLERS,
    PURPOSES,
    REPLY,
    Handler,
    ScriptedChatModel,
    block,
    current_purpose,
    default_handler,
    prompt_text,
    purpose_of,
    tool_call,
)

__all__ = [
    "DEFAULT_HANDLERS",
    "PURPOSES",
    "REPLY",
    "Handler",
    "ScriptedChatModel",
    "block",
    "current_purpose",
    "default_handler",
    "prompt_text",
    "purpose_of",
    "tool_call",
]
