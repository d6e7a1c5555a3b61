"""The memory tools of `graph.middleware.MemoryMiddleware`: async, with sync twins.

On a LangGraph server the services (and so a named provider) open in the server's event
loop, after the agent is built: the tools' provider is resolved when a tool first runs
(`DeferredProvider`). Sync runs (``agent.invoke``) call a tool's ``func``: its coroutine,
run on the services' loop thread and waited for (``wait``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool

from graph.context import Context
from graph.tools import memory_tools
from memory_graph_agent.providers.base import MemoryProvider, ProfileView
from memory_graph_agent.settings import Settings


def middleware_tools(
    provider: DeferredProvider,
    settings: Settings,
    context_of: Callable[[ToolRuntime[Any]], Context],
    wait: Callable[[Coroutine[Any, Any, Any]], Any],
) -> list[BaseTool]:
    """`memory_tools` on ``provider``, each callable from async and sync runs alike."""
    return [
        tool.model_copy(update={"func": _sync_twin(tool.coroutine, wait)})
        for tool in memory_tools(settings=settings, provider=provider, context_of=context_of)  # type: ignore[arg-type]
    ]


def _sync_twin(
    coroutine: Callable[..., Coroutine[Any, Any, Any]],
    wait: Callable[[Coroutine[Any, Any, Any]], Any],
) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return wait(coroutine(*args, **kwargs))

    return call


class DeferredProvider:
    """A provider resolved when a tool first runs, by ``open`` (services, provider)."""

    def __init__(
        self,
        spec: str | MemoryProvider,
        open: Callable[[], Awaitable[tuple[Any, MemoryProvider]]],  # noqa: A002
    ) -> None:
        """Offer ``set_pinned`` and ``touch`` only when the provider ``spec`` has them."""
        self.open = open
        if isinstance(spec, str) or hasattr(spec, "set_pinned"):
            self.set_pinned = self._set_pinned
        if isinstance(spec, str) or hasattr(spec, "touch"):
            self.touch = self._touch

    async def _get(self) -> Any:
        return (await self.open())[1]

    async def profile(self, ctx: Any) -> ProfileView:
        """The provider's ``profile``."""
        return await (await self._get()).profile(ctx)

    async def recall(self, ctx: Any, thread_id: str, query: str, budget: int) -> list:
        """The provider's ``recall``."""
        return await (await self._get()).recall(ctx, thread_id, query, budget)

    async def remember(self, ctx: Any, *args: Any) -> str:
        """The provider's ``remember``."""
        return await (await self._get()).remember(ctx, *args)

    async def forget(self, ctx: Any, ref: str) -> str:
        """The provider's ``forget``."""
        return await (await self._get()).forget(ctx, ref)

    async def _set_pinned(self, ctx: Any, ref: str, pinned: bool) -> str:
        return await (await self._get()).set_pinned(ctx, ref, pinned)

    async def _touch(self, ctx: Any, items: list[Any]) -> None:
        await (await self._get()).touch(ctx, items)
