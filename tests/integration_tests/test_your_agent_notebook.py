"""Execute ``notebooks/your_agent.ipynb`` end to end with nbclient, as the walkthrough is.

The kernel inherits this session's environment (``REDIS_URL``, ``DATABASE_URL`` and
``MEMORY_KEY_PREFIX`` from the ``memory_env`` fixture). The notebook uses the fake chat
model of ``memory_graph_agent.testing``, so it needs no model download and runs in seconds; its
own cells assert that each agent recalls across threads and that another user gets nothing;
the memory the middleware formed is drawn as a picture.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.integration_tests.test_notebook import (  # noqa: F401
    _stream_text,
    execute,
    python3_kernel,
)

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "your_agent.ipynb"


def test_your_agent_notebook_remembers_across_threads(
    memory_env: dict[str, str],
    python3_kernel: str,  # noqa: F811
) -> None:
    nb = execute(NOTEBOOK, python3_kernel, timeout=300)  # its own cells assert too
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    text = "\n".join(_stream_text(c) for c in code_cells)
    assert memory_env["MEMORY_KEY_PREFIX"] in text  # the test session's services
    agent = re.search(r"Recalled in the new thread: (\d+)", text)
    assert agent and int(agent.group(1)) >= 1, text[-2000:]
    assert "Another user recalled: 0" in text
    assert "streamed: ok (" in text
    graph = re.search(r"Recalled by the hand-built graph in a new thread: (\d+)", text)
    assert graph and int(graph.group(1)) >= 1, text[-2000:]
    assert "'mood': 'curious'" in text and "'answered': 5" in text
    # the memory the middleware formed, drawn: its turns and summaries, and the picture
    drawn = next(c for c in code_cells if "memory graph of" in _stream_text(c))
    counts = re.search(r"'summary': (\d+), 'turn': (\d+)\} (\d+) edges", _stream_text(drawn))
    assert counts and min(map(int, counts.groups())) >= 1, _stream_text(drawn)
    assert any("image/png" in o.get("data", {}) for o in drawn.outputs), "no picture drawn"
    assert "closed" in text
