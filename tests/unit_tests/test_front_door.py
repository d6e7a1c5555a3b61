"""``memory_graph_agent``'s public names: importing the package loads no LangGraph."""

from __future__ import annotations

import subprocess
import sys

import memory_graph_agent


def test_importing_the_package_loads_no_langgraph_and_its_names_resolve_on_use() -> None:
    code = (
        "import sys, memory_graph_agent as m\n"
        "assert 'langgraph' not in sys.modules, 'langgraph loaded by the import'\n"
        "assert m.MemoryMiddleware.__name__ == 'MemoryMiddleware'\n"
        "assert 'langgraph' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_public_name_resolves_and_an_unknown_one_says_so() -> None:
    for name in memory_graph_agent.__all__:
        assert getattr(memory_graph_agent, name) is not None, name
    assert sorted(dir(memory_graph_agent)) == sorted(memory_graph_agent.__all__)
    try:
        memory_graph_agent.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")
