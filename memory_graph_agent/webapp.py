"""HTTP routes served next to the graph by ``langgraph dev`` / the LangGraph server.

``GET /metrics`` serves the default Prometheus registry (the server's own ``/metrics``
shadows it and serves the same registry); ``GET /memory/metrics`` serves only the
``agent_memory_*`` metrics. The lifespan closes the server's services.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memory_graph_agent.metrics import exposition
from memory_graph_agent.services import close_server_services


async def metrics(request: Request) -> Response:
    """Text exposition of the default registry."""
    return Response(exposition(), media_type=CONTENT_TYPE_LATEST)


async def memory_metrics(request: Request) -> Response:
    """Text exposition of the ``agent_memory_*`` metrics only."""
    return Response(exposition(memory_only=True), media_type=CONTENT_TYPE_LATEST)


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """Close the services the graph factories opened when the server shuts down."""
    yield
    await close_server_services()


app = Starlette(
    lifespan=lifespan,
    routes=[
        Route("/metrics", metrics, methods=["GET"]),
        Route("/memory/metrics", memory_metrics, methods=["GET"]),
    ],
)
