"""The scheduler's credential on an engine without an in-process client (Aegra): a
short-lived token for the turn's user, signed with the server's own secret, that the
project's auth accepts as that user and nobody else, and only for a minute."""

from __future__ import annotations

import time

import jwt
import pytest

from memory_graph_agent.auth.credentials import AuthConfigError, AuthFailed, Verifier
from memory_graph_agent.core.server_token import (
    TOKEN_TTL_S,
    ServerTokenError,
    check_server_token,
    server_token,
    server_url,
)

SECRET = "s" * 64
ENV = {"MEMORY_AGENT_JWT_SECRET": SECRET, "MEMORY_AGENT_SERVER_URL": "http://127.0.0.1:2026/"}


def test_the_token_is_the_users_for_a_minute_with_no_role() -> None:
    token = server_token("alice", ENV)
    identity = Verifier.from_env(ENV).identify({"authorization": f"Bearer {token}"})
    assert identity.user_id == "alice" and identity.roles == frozenset()
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    assert claims["exp"] - claims["iat"] == TOKEN_TTL_S
    assert abs(claims["iat"] - time.time()) < 5


def test_an_old_token_or_another_servers_is_refused() -> None:
    verifier = Verifier.from_env(ENV)
    stale = server_token("alice", ENV, now=time.time() - TOKEN_TTL_S - 5)
    with pytest.raises(AuthFailed, match="expired"):
        verifier.identify({"authorization": f"Bearer {stale}"})
    foreign = server_token("alice", {**ENV, "MEMORY_AGENT_JWT_SECRET": "t" * 64})
    with pytest.raises(AuthFailed, match="invalid token"):
        verifier.identify({"authorization": f"Bearer {foreign}"})


def test_the_deployments_audience_and_issuer_are_in_the_token() -> None:
    env = {**ENV, "MEMORY_AGENT_JWT_AUDIENCE": "memory", "MEMORY_AGENT_JWT_ISSUER": "us"}
    token = server_token("bob", env)
    assert Verifier.from_env(env).identify({"authorization": f"Bearer {token}"}).user_id == "bob"
    with pytest.raises(AuthFailed):  # a verifier that wants an audience the token lacks
        Verifier.from_env(env).identify({"authorization": f"Bearer {server_token('bob', ENV)}"})


def test_a_server_url_without_a_secret_refuses_to_start() -> None:
    """API keys alone cannot sign a token: the auth configuration fails (closed), at start."""
    keys_only = {"MEMORY_AGENT_API_KEYS": "sk-alice-0123456789abcdef:alice"}
    Verifier.from_env(keys_only)  # no server URL: the in-process client, no token needed
    with pytest.raises(AuthConfigError, match="MEMORY_AGENT_JWT_SECRET"):
        Verifier.from_env({**keys_only, "MEMORY_AGENT_SERVER_URL": "http://127.0.0.1:2026"})
    with pytest.raises(ServerTokenError):
        server_token("alice", keys_only)
    check_server_token({"MEMORY_AGENT_SERVER_URL": "http://x:1", "MEMORY_AGENT_AUTH": "off"})
    assert server_token("alice", {"MEMORY_AGENT_AUTH": "off"}) is None  # nothing to send


@pytest.mark.parametrize("url", ["127.0.0.1:2026", "ftp://host", "http://"])
def test_a_malformed_server_url_is_refused(url: str) -> None:
    with pytest.raises(ServerTokenError, match="http"):
        server_url({"MEMORY_AGENT_SERVER_URL": url})
    assert server_url({}) is None and server_url(ENV) == "http://127.0.0.1:2026"


def test_no_token_for_an_id_that_could_escape_its_keys() -> None:
    with pytest.raises(ValueError, match="user_id"):
        server_token("alice:*", ENV)


async def test_checkpoint_retention_is_the_engines_where_it_has_no_in_process_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Aegra (reached at the server URL) prunes with its own thread TTL; the maintenance
    graph says so instead of failing on the missing loopback ('NoneType' not callable)."""
    from memory_graph_agent.storage.server_threads import (
        RetentionUnsupportedError,
        ServerCheckpoints,
    )

    monkeypatch.setenv("MEMORY_AGENT_SERVER_URL", "http://127.0.0.1:2026")
    with pytest.raises(RetentionUnsupportedError, match="checkpointer.ttl"):
        await ServerCheckpoints().survey(["5f0c2f0e-8a9b-4c1d-9e2f-3a4b5c6d7e8f"])
    await ServerCheckpoints().prune([])  # nothing to prune: nothing asked of any server
