"""HTTP routes served next to the graph by ``langgraph dev``, the LangGraph server and Aegra.

``GET /metrics`` serves the default Prometheus registry (the server's own ``/metrics``
shadows it and serves the same registry); ``GET /memory/metrics`` serves only the
``agent_memory_*`` metrics (no label carries a user or thread). ``DELETE
/memory/users/{user_id}`` forgets a user: the caller themself, or an admin. With
``enable_custom_route_auth`` in ``langgraph.json`` the server authenticates these routes
with the same `Auth` handler as its own, so ``request.user`` is the caller. The lifespan
closes the server's services.

The app is a FastAPI one: Aegra takes only FastAPI apps, and authenticates only routes
registered as FastAPI routes (plain Starlette routes were served to anyone). Importing it
loads the `Auth` configuration too, so a deployment whose auth cannot load (a key shorter
than 16 characters, say) refuses to start on every engine: Aegra loads the auth module at
the first request and served everyone as ``anonymous`` when it failed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memory_graph_agent.auth import handlers  # noqa: F401 - a broken auth config stops the server
from memory_graph_agent.auth.policy import Forbidden, check_forget
from memory_graph_agent.core.ids import InvalidIdError, validate_id
from memory_graph_agent.core.metrics import exposition
from memory_graph_agent.services.stores import close_server_services, server_services
from memory_graph_agent.storage.forget import forget_user


async def metrics(request: Request) -> Response:
    """Text exposition of the default registry."""
    return Response(exposition(), media_type=CONTENT_TYPE_LATEST)


async def memory_metrics(request: Request) -> Response:
    """Text exposition of the ``agent_memory_*`` metrics only."""
    return Response(exposition(memory_only=True), media_type=CONTENT_TYPE_LATEST)


async def forget(request: Request) -> Response:
    """Delete everything stored about a user; answer with the counts of what was deleted."""
    if "user" not in request.scope or not request.user.is_authenticated:
        return JSONResponse({"detail": "authentication required"}, status_code=401)
    try:
        target = validate_id(request.path_params["user_id"], "user_id")
        check_forget(request.user.identity, request.auth.scopes, target)
    except InvalidIdError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=422)
    except Forbidden as exc:
        return JSONResponse({"detail": str(exc)}, status_code=403)
    services = await server_services()
    report = await forget_user(
        target, redis=services.redis, db=services.db, prefix=services.keys.prefix
    )
    return JSONResponse(report)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Close the services the graph factories opened when the server shuts down."""
    yield
    await close_server_services()


app = FastAPI(title="memory-graph-agent", lifespan=lifespan, openapi_url=None, docs_url=None)
app.add_api_route("/metrics", metrics, methods=["GET"], include_in_schema=False)
app.add_api_route("/memory/metrics", memory_metrics, methods=["GET"], include_in_schema=False)
app.add_api_route("/memory/users/{user_id}", forget, methods=["DELETE"], include_in_schema=False)
