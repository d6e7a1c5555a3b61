"""The server's own way to its run API: its URL and a short-lived token for one user.

An engine without an in-process client (Aegra) is reached by the memory scheduler
(`graph.background.ServerScheduler`) over HTTP, at ``MEMORY_AGENT_SERVER_URL``: the
server's own address, as its replicas reach it (``http://127.0.0.1:2026``). The request
passes the server's auth like any other, as the turn's user: the run it creates is
theirs, on their memory thread. No user's key is kept for that. The server signs a token
for that user with its own ``MEMORY_AGENT_JWT_SECRET`` (HS256, checked by
`memory_graph_agent.auth.credentials.Verifier` as any token), valid `TOKEN_TTL_S`
seconds, with no role, and with the deployment's ``MEMORY_AGENT_JWT_AUDIENCE`` /
``MEMORY_AGENT_JWT_ISSUER`` when they are set. With authentication off
(``MEMORY_AGENT_AUTH=off``) no token is sent.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from urllib.parse import urlsplit

import jwt

from memory_graph_agent.core.ids import validate_id

SERVER_URL_ENV = "MEMORY_AGENT_SERVER_URL"
TOKEN_TTL_S = 60
"""How long a scheduler's token is valid: it is minted right before the one request."""


class ServerTokenError(ValueError):
    """``MEMORY_AGENT_SERVER_URL`` is malformed, or set without a secret to sign with."""


def server_url(env: Mapping[str, str] = os.environ) -> str | None:
    """The server's own URL (``MEMORY_AGENT_SERVER_URL``), or None: the in-process client."""
    url = env.get(SERVER_URL_ENV, "").strip().rstrip("/")
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ServerTokenError(f"{SERVER_URL_ENV} must be an http(s) URL, got {url!r}")
    return url


def _auth_off(env: Mapping[str, str]) -> bool:
    return env.get("MEMORY_AGENT_AUTH", "on").strip().lower() == "off"


def check_server_token(env: Mapping[str, str] = os.environ) -> None:
    """Raise `ServerTokenError` if the server URL is set but tokens cannot be minted."""
    if server_url(env) is None or _auth_off(env):
        return
    if not env.get("MEMORY_AGENT_JWT_SECRET"):
        raise ServerTokenError(
            f"{SERVER_URL_ENV} is set: memory runs are created over HTTP with a token the "
            "server signs, so set MEMORY_AGENT_JWT_SECRET (API keys alone cannot sign one)"
        )


def server_token(
    user_id: str,
    env: Mapping[str, str] = os.environ,
    *,
    ttl_s: float = TOKEN_TTL_S,
    now: float | None = None,
) -> str | None:
    """A token for ``user_id`` signed with the server's secret; None with auth off."""
    if _auth_off(env):
        return None
    check_server_token({**env, SERVER_URL_ENV: env.get(SERVER_URL_ENV) or "http://server"})
    issued = int(time.time() if now is None else now)
    claims: dict[str, object] = {
        "sub": validate_id(user_id, "user_id"),
        "iat": issued,
        "exp": issued + max(1, int(ttl_s)),
        "roles": [],
    }
    if audience := env.get("MEMORY_AGENT_JWT_AUDIENCE"):
        claims["aud"] = audience
    if issuer := env.get("MEMORY_AGENT_JWT_ISSUER"):
        claims["iss"] = issuer
    return jwt.encode(claims, env["MEMORY_AGENT_JWT_SECRET"], algorithm="HS256")
