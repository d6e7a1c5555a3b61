"""``memory-agent doctor`` and the demo's pre-flight: each part of memory does its real work once.

A check that only starts a server is not enough: the AMX build of llama.cpp started,
answered ``/models`` and died at the user's first message. So each check does what a turn
does, at a turn's size:

* **stores**: the services answer (the embedded ones are started), and pgvector stores and
  finds vectors through an HNSW index (`vector_selfcheck`, with a crash diagnosis);
* **embeddings**: the configured model embeds a sentence, and that vector is stored and
  found again as its own nearest neighbour;
* **chat model**: the model answers a prompt of at least `MODEL_PROMPT_TOKENS` tokens,
  constrained by the grammar of a memory schema (`FactList`), as fact extraction does.

A failure names what died and how: the local model server's signal, the library and
function the kernel saw, its last log lines and the remedy (`model_server.ServerDeath`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import asdict, dataclass

import redis
from rich.markup import escape

from graph.context import Context
from memory_graph_agent.cli.console import console
from memory_graph_agent.core.tokens import text_tokens
from memory_graph_agent.local.chat_model import LocalModelUnavailable, StructuredOutputError
from memory_graph_agent.local.embedded import (
    EmbeddedServiceError,
    embedded_log,
    ensure_services,
    vector_selfcheck,
)
from memory_graph_agent.local.model_server import ModelServerError
from memory_graph_agent.prompting.llm import tagged
from memory_graph_agent.prompting.schemas import FactList
from memory_graph_agent.services.models import (
    default_embedding_model,
    load_chat_model,
    load_embeddings,
)

MODEL_PROMPT_TOKENS = 200
"""The chat check's prompt is at least this long: a real prompt, not a ping."""
MODEL_TIMEOUT_S = 120.0
PROBE_TEXT = "Zhang San lives in Porto and prefers Rust over Go."
DOCTOR_PROMPT = """Summaries of the user's recent conversations, oldest first:
1. The user, Zhang San, introduced themself as a VIP customer who lives in Berlin, and asked
   how to keep a sourdough starter alive while travelling for two weeks.
2. The user compared Go and Java for a small web service, said they prefer Go for its fast
   builds and simple deployment, and asked for a minimal HTTP server example.
3. The user asked for a stretching routine after long days at the desk, and said they run
   three times a week along the river before work.
4. The user said they moved from Berlin to Porto last month and asked which documents a
   resident needs to register an address there.
5. The user asked how tides work, then how the moon's distance changes them, and said they
   want to learn sailing next summer with their sister.
6. The user said that for programming they now prefer Rust over Go, because of its type
   system, and asked for a book to learn ownership and borrowing.

List the stable facts about the user these summaries state outright (a key, the value in
the user's words, and its importance)."""


@dataclass(frozen=True)
class CheckResult:
    """One check: its name, whether it passed, what it found or why it failed, its time."""

    name: str
    ok: bool
    detail: str
    seconds: float


def check_stores() -> tuple[CheckResult, str | None]:
    """The services answer and pgvector works; also return the database URL (None: failed)."""
    started = time.perf_counter()
    try:
        urls = ensure_services()
        client = redis.Redis.from_url(urls.redis_url, socket_timeout=10)
        try:
            client.ping()
        finally:
            client.close()
        vector_selfcheck(urls.database_url, embedded_log(urls.database_url))
    except (EmbeddedServiceError, redis.RedisError, OSError) as exc:
        return CheckResult("stores", False, str(exc), time.perf_counter() - started), None
    detail = "Redis answers; pgvector stores and finds 200 vectors through HNSW"
    return CheckResult("stores", True, detail, time.perf_counter() - started), urls.database_url


def check_embeddings(database_url: str, spec: str | None = None) -> CheckResult:
    """Embed `PROBE_TEXT` with the configured model, store the vector and find it again."""
    spec = spec or default_embedding_model()
    started = time.perf_counter()
    try:
        embeddings, dim = load_embeddings(spec)
        vector = embeddings.embed_query(PROBE_TEXT)
        if len(vector) != dim:
            raise ValueError(f"{spec} gave a {len(vector)}-d vector, the store expects {dim}")
        vector_selfcheck(database_url, embedded_log(database_url), probe=vector)
    except Exception as exc:  # noqa: BLE001 - any failure is the finding
        return CheckResult(
            "embeddings",
            False,
            f"{spec}: {type(exc).__name__}: {exc}",
            time.perf_counter() - started,
        )
    detail = f"{spec} embedded a sentence ({dim}-d); the vector was stored and found"
    return CheckResult("embeddings", True, detail, time.perf_counter() - started)


async def check_chat_model(spec: str | None = None) -> CheckResult:
    """Send the model `DOCTOR_PROMPT` with the grammar of `FactList`."""
    spec = spec or Context().model  # the agent's: MODEL, else OpenAI with a key, else local
    started = time.perf_counter()
    name = f"chat model {spec}"
    try:
        model = load_chat_model(spec)
        structured = model.with_structured_output(FactList)
        call = structured.ainvoke(DOCTOR_PROMPT, tagged("extract_facts"))  # as memory calls it
        result = await asyncio.wait_for(call, MODEL_TIMEOUT_S)
    except StructuredOutputError as exc:  # it ran the prompt and answered: weak, not broken
        detail = f"answered a {text_tokens(DOCTOR_PROMPT)}-token prompt, off its schema ({exc})"
        return CheckResult(name, True, detail[:300], time.perf_counter() - started)
    except (LocalModelUnavailable, ModelServerError) as exc:
        return CheckResult(name, False, str(exc), time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 - a missing package, a bad key, a timeout
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return CheckResult(name, False, detail, time.perf_counter() - started)
    facts = result.facts if isinstance(result, FactList) else []
    fact = ", ".join(f"{f.key}={f.value}" for f in facts) or "no fact"
    detail = (
        f"answered a {text_tokens(DOCTOR_PROMPT)}-token prompt under the grammar of "
        f"FactList: {fact[:80]!r}"
    )
    return CheckResult(name, True, detail, time.perf_counter() - started)


async def run_checks(model: str | None = None) -> list[CheckResult]:
    """Every check, in order; the embedding check needs the stores."""
    stores, database_url = await asyncio.to_thread(check_stores)
    results = [stores]
    if database_url is not None:
        results.append(await asyncio.to_thread(check_embeddings, database_url))
    results.append(await check_chat_model(model))
    return results


def print_results(results: list[CheckResult]) -> bool:
    """Print one line per check (the failures in full); return whether all passed."""
    for result in results:
        mark = "[green]ok[/]" if result.ok else "[red]FAILED[/]"
        console.print(
            f"{mark} {escape(result.name)} ({result.seconds:.1f} s): {escape(result.detail)}"
        )
    return all(result.ok for result in results)


async def _doctor(args: argparse.Namespace) -> int:
    results = await run_checks(args.model)
    if args.json:
        console.print_json(json.dumps([asdict(r) for r in results]))
        return 0 if all(r.ok for r in results) else 1
    return 0 if print_results(results) else 1
