"""Execute ``notebooks/walkthrough.ipynb`` end to end with nbclient.

The kernel inherits this session's environment (``REDIS_URL``, ``DATABASE_URL`` and
``MEMORY_KEY_PREFIX`` from the ``memory_env`` fixture), so the notebook writes into the
throw-away test database and key prefix. It runs the real offline model (SmolLM2) for
nine turns, so it takes a few minutes.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO_ROOT / "notebooks" / "walkthrough.ipynb"
KERNEL = "python3"
# What jupyter_client replaces with sys.executable when a kernelspec's argv[0] is it.
_MAJOR, _MINOR = sys.version_info[:2]
_SELF_PYTHON = {"python", f"python{_MAJOR}", f"python{_MAJOR}.{_MINOR}"}


def _kernel_uses_this_python() -> bool:
    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL)
    except NoSuchKernel:
        return False
    exe = spec.argv[0] if spec.argv else ""
    if exe in _SELF_PYTHON:
        return True
    try:
        return Path(exe).resolve() == Path(sys.executable).resolve()
    except OSError:
        return False


@pytest.fixture(scope="module")
def python3_kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Make sure kernel ``python3`` runs this interpreter (the venv's python)."""
    if _kernel_uses_this_python():
        yield KERNEL
        return
    from ipykernel.kernelspec import install

    prefix = tmp_path_factory.mktemp("jupyter-prefix")
    install(kernel_name=KERNEL, prefix=str(prefix))
    saved = os.environ.get("JUPYTER_PATH")
    data_dir = str(prefix / "share" / "jupyter")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (data_dir, saved) if p)
    try:
        assert _kernel_uses_this_python(), "kernelspec python3 still not this interpreter"
        yield KERNEL
    finally:
        if saved is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = saved


def _stream_text(cell: nbformat.NotebookNode) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            parts.append(out.get("text", ""))
        elif out.get("output_type") in {"execute_result", "display_data"}:
            parts.append(out.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def execute(notebook: Path, kernel: str, timeout: int = 600) -> nbformat.NotebookNode:
    """Run every cell of ``notebook`` in ``kernel``, from its folder; return the result.

    Raises ``CellExecutionError`` on the first failing cell. ``NOTEBOOK_OUT`` keeps the
    executed copy for a look.
    """
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel,
        resources={"metadata": {"path": str(notebook.parent)}},
    )
    try:
        client.execute()
    finally:
        if out := os.environ.get("NOTEBOOK_OUT"):
            nbformat.write(nb, out)
    return nb


def test_walkthrough_notebook_runs_and_recalls(
    memory_env: dict[str, str], python3_kernel: str
) -> None:
    nb = execute(NOTEBOOK, python3_kernel)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    for cell in code_cells:
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"cell failed: {cell.source[:80]!r}: {errors[0].get('ename')}"

    text = "\n".join(_stream_text(c) for c in code_cells)
    # the kernel really used the test session's services
    assert memory_env["MEMORY_KEY_PREFIX"] in text
    # turns ran and memory worked: evictions, summaries stored
    assert "evicted to pending" in text
    assert re.search(r"consolidate: summary \w+ stored", text)
    memories = re.search(r"(\d+) memories in memories_384", text)
    assert memories and int(memories.group(1)) >= 1, text[-2000:]
    # the new thread recalled the old thread's memories
    recall_cell = next(c for c in code_cells if "Recalled memories" in _stream_text(c))
    found = re.search(r"Recalled memories in the new thread: (\d+)", _stream_text(recall_cell))
    assert found and int(found.group(1)) >= 1, _stream_text(recall_cell)
    assert "similarity" in _stream_text(recall_cell)
    # memory that evolves: the changed preference keeps its history and is noted
    assert "was preferred_language='Python'" in text, text[-3000:]
    assert "changed: preferred_language Python → Rust" in text, text[-3000:]
    assert "decision: summary" in text
    # the memory drawn as a graph: the user's turns and summaries, and the picture itself
    drawn = next(c for c in code_cells if "memory graph of" in _stream_text(c))
    counts = re.search(r"'summary': (\d+), 'turn': (\d+)\} (\d+) edges", _stream_text(drawn))
    assert counts and min(map(int, counts.groups())) >= 1, _stream_text(drawn)
    assert any("image/png" in o.get("data", {}) for o in drawn.outputs), "no picture drawn"
    assert "'dry_run': True" in text or "dry_run" in text
