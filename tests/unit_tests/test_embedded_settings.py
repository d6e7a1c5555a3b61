"""The embedded PostgreSQL's memory setting: an eighth of the RAM, within bounds."""

from __future__ import annotations

import pytest

from memory_graph_agent.local.embedded.postgres_server import memory_bytes, shared_buffers_mb

GIB = 1024**3


@pytest.mark.parametrize(
    ("ram_gib", "expected"), [(0.5, 128), (2, 256), (4, 512), (8, 1024), (64, 1024)]
)
def test_shared_buffers_is_an_eighth_of_the_ram_from_128_mb_to_1_gb(monkeypatch, ram_gib, expected):
    monkeypatch.delenv("MEMORY_AGENT_PG_SHARED_BUFFERS_MB", raising=False)
    assert shared_buffers_mb(int(ram_gib * GIB)) == expected


def test_shared_buffers_can_be_set(monkeypatch):
    monkeypatch.setenv("MEMORY_AGENT_PG_SHARED_BUFFERS_MB", "300")
    assert shared_buffers_mb(64 * GIB) == 300


def test_a_container_limit_lower_than_the_ram_counts(tmp_path):
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    v2.write_text("max\n")  # cgroup v2 without a limit
    v1.write_text(f"{2 * GIB}\n")
    assert memory_bytes((str(v2), str(v1))) == min(2 * GIB, memory_bytes(()))
    v1.write_text(f"{2**63 - 4096}\n")  # cgroup v1 without a limit: the machine's RAM
    assert memory_bytes((str(v2), str(v1), str(tmp_path / "absent"))) == memory_bytes(())
