"""Query embeddings started ahead of recall, each taken once by recall for the same text.

A turn's recall needs the embedding of the newest human message. Whoever sees that
message before recall runs (the graph's run, as it starts: `graph.prefetch`) calls
`QueryVectors.start`; recall's `QueryVectors.embed` then awaits the embedding already
running instead of starting its own, so the embedding overlaps the run's checkpoint load.
Nothing else changes: the same text, the same call, so the same vector, and an error of
the embedding is raised where recall awaits it.

The memo is keyed by text alone (the same text has the same vector for every user) and
holds at most `QueryVectors.size` embeddings: one started but never taken (a run that
refused its input, a turn in ``tool`` mode) is cancelled when newer ones push it out.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable

from langchain_core.embeddings import Embeddings


class QueryVectors:
    """Embeddings of queries started ahead (`start`), taken once each (`embed`)."""

    size = 32
    """Embeddings held at once; the oldest untaken one is cancelled beyond it."""

    def __init__(self, embeddings: Embeddings) -> None:
        self._embeddings = embeddings
        self._started: OrderedDict[str, asyncio.Future[list[float]]] = OrderedDict()

    def __len__(self) -> int:
        """Embeddings started ahead and not taken yet."""
        return len(self._started)

    def start(self, text: str) -> None:
        """Start embedding ``text`` on the running loop, unless it is already running."""
        if not text or self._live(text) is not None:
            return
        future = asyncio.ensure_future(self._embeddings.aembed_query(text))
        future.add_done_callback(_read_error)  # one nobody takes logs nothing
        self._started[text] = future
        while len(self._started) > self.size:
            _, oldest = self._started.popitem(last=False)
            oldest.cancel()

    def embed(self, text: str) -> Awaitable[list[float]]:
        """``text``'s embedding: the one started ahead (then taken), or a new one."""
        future = self._live(text)
        if future is not None:
            del self._started[text]
            return future
        return self._embeddings.aembed_query(text)

    def discard(self, text: str) -> None:
        """Cancel ``text``'s embedding started ahead, if any (the run will not search)."""
        future = self._started.pop(text, None)
        if future is not None:
            future.cancel()

    def _live(self, text: str) -> asyncio.Future[list[float]] | None:
        """``text``'s started embedding if it can still be awaited on this loop, else ``None``."""
        future = self._started.get(text)
        if future is None:
            return None
        if future.cancelled() or future.get_loop() is not asyncio.get_running_loop():
            del self._started[text]  # of a closed or other loop (tests, notebooks): start anew
            return None
        return future


def _read_error(future: asyncio.Future) -> None:
    """Mark a finished embedding's error as read (whoever takes it still gets it)."""
    if not future.cancelled():
        future.exception()
