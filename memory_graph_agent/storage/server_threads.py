"""A user's threads kept by `langgraph dev` or the LangGraph server: deleted, or pruned.

The server keeps each thread's messages in its own checkpoints, out of reach of our
Postgres; a forgotten user's message sent again to an old thread would bring them all back
into memory. Threads are found by id (those our stores know for the user) and by thread
metadata ``user_id`` (how clients and auth handlers tag them); only `langgraph_sdk` calls.
`ServerCheckpoints` prunes threads' old checkpoints from inside the server (maintenance).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.errors import LangGraphError, NotFoundError

from memory_graph_agent.core.server_token import SERVER_URL_ENV, server_url

PAGE = 100
USER_METADATA_KEY = "user_id"
"""Thread metadata key naming the user a thread belongs to."""


def _is_server_id(thread_id: str) -> bool:
    """Server thread ids are UUIDs; other ids (a CLI's ``t-…``) never name one."""
    try:
        uuid.UUID(thread_id)
    except ValueError:
        return False
    return True


class ServerUnavailableError(RuntimeError):
    """The LangGraph server did not answer or refused; nothing was deleted."""


class ServerThreads:
    """The threads of one LangGraph server (``url``), through `langgraph_sdk`."""

    def __init__(self, url: str, **client_options: Any) -> None:
        """Connect to ``url`` with `langgraph_sdk.get_client` and ``client_options``.

        Without ``api_key`` the client reads the usual environment variables.
        """
        self.url = url
        self.client = get_client(url=url, **client_options)

    async def tagged(self, user_id: str) -> list[str]:
        """Ids of the threads whose metadata names ``user_id``."""
        found: list[str] = []
        while True:
            page = await self.client.threads.search(
                metadata={USER_METADATA_KEY: user_id}, limit=PAGE, offset=len(found)
            )
            found += [t["thread_id"] for t in page]
            if len(page) < PAGE:
                return found

    async def delete_user_threads(self, user_id: str, known: Iterable[str]) -> list[str]:
        """Delete ``known`` threads (where they exist) and those tagged with ``user_id``.

        Returns the ids of the threads deleted. Raises `ServerUnavailableError` (server
        unreachable, or it refused) so that `forget_user` stops before deleting anything else.
        """
        deleted = []
        try:
            wanted = {t for t in known if _is_server_id(t)} | set(await self.tagged(user_id))
            for thread_id in sorted(wanted):
                try:
                    await self.client.threads.delete(thread_id)
                except NotFoundError:
                    continue
                deleted.append(thread_id)
        except (httpx.HTTPError, LangGraphError) as exc:
            raise ServerUnavailableError(
                f"LangGraph server {self.url} failed ({type(exc).__name__}: {exc}) after "
                f"deleting {len(deleted)} threads; nothing else was deleted, run forget again"
            ) from exc
        return deleted


class RetentionUnsupportedError(RuntimeError):
    """The server's runtime cannot prune checkpoints (``langgraph dev``'s in-memory one)."""


class ServerCheckpoints:
    """Checkpoint retention of the server's own threads, from a graph running on it.

    Goes through the server's in-process loopback (`get_client()` without a URL):
    ``threads.prune(strategy="keep_latest")``. A thread that is not idle (a run in
    flight or queued, or interrupted) is held whole. An engine without that loopback
    (Aegra, reached at ``MEMORY_AGENT_SERVER_URL``) applies ``langgraph.json``'s
    ``checkpointer.ttl`` itself, and its ``threads.prune`` means something else: there,
    retention is the engine's (`RetentionUnsupportedError`).
    """

    def __init__(self, client: Any = None) -> None:
        self.client = client

    def _client(self) -> Any:
        if self.client is not None:
            return self.client
        if server_url() is not None:
            raise RetentionUnsupportedError(
                f"no in-process client ({SERVER_URL_ENV} is set): the engine prunes its "
                "threads' checkpoints itself (langgraph.json's checkpointer.ttl)"
            )
        return get_client()

    async def survey(self, thread_ids: Sequence[str]) -> dict[str, Literal["prune", "in_flight"]]:
        """Each existing thread: prune it when idle, else hold it."""
        verdicts: dict[str, Literal["prune", "in_flight"]] = {}
        for thread_id in thread_ids:
            try:
                thread = await self._client().threads.get(thread_id)
            except NotFoundError:
                continue
            verdicts[thread_id] = "prune" if thread.get("status") == "idle" else "in_flight"
        return verdicts

    async def prune(self, thread_ids: Sequence[str]) -> None:
        """Keep only the latest checkpoint of each thread.

        Raises `RetentionUnsupportedError` where the runtime cannot (``langgraph dev``).
        """
        if not thread_ids:
            return
        try:
            await self._client().threads.prune(list(thread_ids), strategy="keep_latest")
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == 422:
                raise RetentionUnsupportedError(exc.response.text[:200]) from exc
            raise
