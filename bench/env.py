"""Where a benchmark run stores its data, and what machine it runs on.

`isolated_services` gives a run a fresh database and Redis key prefix (dropped afterwards)
or the ones the caller passes (kept), and points ``REDIS_URL`` / ``DATABASE_URL`` /
``MEMORY_KEY_PREFIX`` at them; `machine_info` records the machine next to the numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import sys
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from redis.asyncio import Redis

from memory_graph_agent.local.embedded import ensure_services
from memory_graph_agent.storage.postgres import with_database
from memory_graph_agent.testing import environment

EMBEDDING = "local:all-minilm-l6-v2"
"""The embeddings of every benchmark (local MiniLM, 384 dimensions)."""
PACKAGES = ("langgraph", "langchain-core", "langchain-postgres", "langgraph-checkpoint-postgres",
            "psycopg", "redis", "sentence-transformers", "torch", "numpy")  # fmt: skip
"""Libraries whose versions `machine_info` records."""
POSTGRES_SETTINGS = ("shared_buffers", "work_mem", "maintenance_work_mem",
                     "max_parallel_maintenance_workers", "max_connections")  # fmt: skip


@dataclass
class BenchEnv:
    """Where a benchmark run stores its data."""

    redis_url: str
    database_url: str
    key_prefix: str
    owned: bool
    """True when this run created the database/prefix and drops them at the end."""


@contextlib.asynccontextmanager
async def isolated_services(
    database_url: str | None = None,
    redis_url: str | None = None,
    key_prefix: str | None = None,
    tag: str = "bench",
    keep: bool = False,
) -> AsyncIterator[BenchEnv]:
    """A fresh database + key prefix (dropped afterwards unless ``keep``), or the given ones.

    Sets ``REDIS_URL`` / ``DATABASE_URL`` / ``MEMORY_KEY_PREFIX`` for the duration, so
    `services_session` opened inside connects there. Close those services before leaving.
    """
    owned, server_url = database_url is None, None
    if database_url is None or redis_url is None:
        urls = await asyncio.to_thread(ensure_services)
        redis_url = redis_url or urls.redis_url
        if database_url is None:
            server_url, db = urls.database_url, f"{tag}_{uuid.uuid4().hex[:12]}"
            async with await psycopg.AsyncConnection.connect(server_url, autocommit=True) as conn:
                await conn.execute(f'CREATE DATABASE "{db}"')
            database_url = with_database(server_url, db)
            key_prefix = key_prefix or f"{tag}-{db}"
    key_prefix = key_prefix or f"{tag}-{uuid.uuid4().hex[:12]}"
    env = BenchEnv(redis_url, database_url, key_prefix, owned)
    values = {"REDIS_URL": redis_url, "DATABASE_URL": database_url, "MEMORY_KEY_PREFIX": key_prefix}
    try:
        with environment(values):
            yield env
    finally:
        if owned and not keep:
            await _drop_owned(env, server_url)
        elif owned:
            print(f"kept {env.database_url} and Redis keys {env.key_prefix}:*", file=sys.stderr)


async def _drop_owned(env: BenchEnv, server_url: str | None) -> None:
    """Delete the run's Redis keys and drop its database."""
    redis = Redis.from_url(env.redis_url)
    try:
        keys = [k async for k in redis.scan_iter(match=f"{env.key_prefix}:*", count=1000)]
        for i in range(0, len(keys), 1000):
            await redis.delete(*keys[i : i + 1000])
    finally:
        await redis.aclose()
    if server_url:
        db = urlsplit(env.database_url).path.lstrip("/")
        async with await psycopg.AsyncConnection.connect(server_url, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def cpu_id() -> dict[str, Any]:
    """The CPU's model name, family, model, AVX-512 and VNNI (from /proc/cpuinfo)."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip().lower(), value.strip())
    flags = set(fields.get("flags", "").split())
    return {"name": fields.get("model name") or platform.processor() or "unknown",
            "family": fields.get("cpu family"), "model": fields.get("model"),
            **{f: f in flags for f in ("avx512f", "avx512_vnni", "avx_vnni")}}  # fmt: skip


def versions(packages: Iterable[str]) -> dict[str, str | None]:
    """Installed versions of ``packages`` (None when absent)."""
    out: dict[str, str | None] = {}
    for name in packages:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


async def machine_info(database_url: str) -> dict[str, Any]:
    """Cores, CPU, Python, PostgreSQL/pgvector versions, load, library versions."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:

        async def one(sql: str) -> Any:
            row = await (await conn.execute(sql)).fetchone()
            return row[0] if row else None

        pgvector = await one("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        pg = await one("SHOW server_version")
        settings = {name: await one(f"SHOW {name}") for name in POSTGRES_SETTINGS}
    try:
        import torch

        torch_threads = torch.get_num_threads()
    except Exception:  # noqa: BLE001
        torch_threads = None
    return {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": (cpu := cpu_id()).pop("name"),
        "cpu_id": cpu if cpu["family"] else {},
        "loadavg_at_start": list(os.getloadavg()),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "postgres": pg,
        "pgvector": pgvector,
        "postgres_settings": settings,
        "torch_threads": torch_threads,
        "packages": versions(PACKAGES),
    }
