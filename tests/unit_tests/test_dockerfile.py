"""The checked-in Dockerfile is what `langgraph dockerfile` makes of langgraph.json today.

Regenerating it needs no Docker (the CLI only writes text). The image itself is not
built by the suite.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit_tests.test_pins import _pins

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).parent / "langgraph"
# the CLI names the copy of the project after its folder; a clone may be named anything
IMAGE_DIR = "/deps/memory-graph-agent"
REGENERATE = (
    "langgraph dockerfile --api-version {version} -c langgraph.json Dockerfile, then replace "
    f"/deps/<folder name> with {IMAGE_DIR}"
)


def _generate(tmp_path: Path) -> str:
    if not LANGGRAPH.exists():
        pytest.skip(f"{LANGGRAPH} not found (install langgraph-cli)")
    out = tmp_path / "Dockerfile"
    version = _pins()["langgraph-api"]
    cmd = [str(LANGGRAPH), "dockerfile", "--api-version", version, "-c", "langgraph.json", str(out)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=120)
    return out.read_text().replace(f"/deps/{ROOT.name}", IMAGE_DIR)


def test_the_dockerfile_is_regenerated_identically(tmp_path: Path) -> None:
    version = _pins()["langgraph-api"]
    assert (ROOT / "Dockerfile").read_text() == _generate(tmp_path), REGENERATE.format(
        version=version
    )


def test_the_dockerfile_serves_both_graphs_with_auth_on_the_pinned_server() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert text.startswith(f"FROM langchain/langgraph-api:{_pins()['langgraph-api']}-py3.11\n")
    env = {m[1]: json.loads(m[2]) for m in re.finditer(r"^ENV (\w+)='(.*)'$", text, re.M)}
    config = json.loads((ROOT / "langgraph.json").read_text())

    def local(path: str) -> Path:
        file, _, name = path.partition(":")
        assert file.startswith(IMAGE_DIR + "/") and name, path
        local_file = ROOT / file.removeprefix(IMAGE_DIR + "/")
        defines = rf"^({name} = |(async )?def {name}\()"
        assert local_file.is_file() and re.search(defines, local_file.read_text(), re.M), path
        return local_file

    assert set(env["LANGSERVE_GRAPHS"]) == set(config["graphs"]) == {"memory_agent", "maintenance"}
    for path in env["LANGSERVE_GRAPHS"].values():
        assert local(path).parent.name == "graph"
    assert local(env["LANGGRAPH_AUTH"]["path"]) == ROOT / "memory_graph_agent/auth/handlers.py"
    assert env["LANGGRAPH_AUTH"]["disable_studio_auth"] is True
    assert local(env["LANGGRAPH_HTTP"]["app"]) == ROOT / "memory_graph_agent/webapp.py"
    assert env["LANGGRAPH_HTTP"]["enable_custom_route_auth"] is True
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git/", ".venv/", ".env"} <= set(ignored)
