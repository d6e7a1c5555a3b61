"""`memory-agent doctor` (and the demo's pre-flight): each part does its real work, or says
what died, how, where and what to do.

The stores and the embeddings are the real embedded ones. The chat model is the real local
server: a prompt of 200+ tokens under the grammar of a memory schema, killed by a signal
while it works, or failing at its start.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from memory_graph_agent.cli import doctor
from memory_graph_agent.core.tokens import text_tokens
from memory_graph_agent.local.chat_model import LocalChatModel
from memory_graph_agent.local.model_server import LocalModelServer
from memory_graph_agent.services.models import load_chat_model, register_chat_model


def test_the_chat_check_sends_a_real_prompt() -> None:
    assert text_tokens(doctor.DOCTOR_PROMPT) >= doctor.MODEL_PROMPT_TOKENS


def test_the_stores_and_embeddings_do_their_real_work(services) -> None:
    stores, database_url = doctor.check_stores()
    assert stores.ok and database_url, stores.detail
    embeddings = doctor.check_embeddings(database_url)
    assert embeddings.ok and "384-d" in embeddings.detail, embeddings.detail


async def test_a_model_server_that_dies_at_its_start_is_named_with_its_last_lines(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "no-such-model.gguf"
    server = LocalModelServer(model_path=str(missing), alias="broken")
    spec = register_chat_model(f"broken-{uuid.uuid4().hex[:6]}", LocalChatModel.for_server(server))
    result = await doctor.check_chat_model(spec)
    assert not result.ok
    assert "the local model server (llama.cpp) exited with status" in result.detail
    assert "no-such-model.gguf" in result.detail, "its last log lines say why"
    assert "Remedy: " in result.detail


@pytest.mark.slow
@pytest.mark.local_model
def test_doctor_passes_with_the_real_local_model() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "memory_graph_agent.cli.main", "doctor", "--json"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "MODEL": ""},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads(run.stdout)
    assert [r["name"] for r in results] == ["stores", "embeddings", "chat model local:smollm2"]
    assert all(r["ok"] for r in results), results
    assert "under the grammar of FactList" in results[2]["detail"]


@pytest.mark.slow
@pytest.mark.local_model
async def test_a_model_server_killed_by_a_signal_fails_the_doctor_by_name() -> None:
    server = load_chat_model("local:smollm2")._server
    await asyncio.to_thread(server.ensure)
    check = asyncio.create_task(doctor.check_chat_model("local:smollm2"))
    await asyncio.sleep(0.3)  # the prompt is on its way (or queued): the server dies under it
    os.kill(server._proc.pid, signal.SIGSEGV)
    result = await check
    assert not result.ok
    assert "killed by signal 11 (SIGSEGV)" in result.detail
    assert "Its last log lines: " in result.detail and "Remedy: " in result.detail
    assert "Connection error" not in result.detail
