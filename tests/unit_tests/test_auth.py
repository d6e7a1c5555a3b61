"""The pure auth logic: credentials to identities, and the authorization rules."""

from __future__ import annotations

from dataclasses import fields

import jwt
import pytest

from graph.background import memory_run, memory_thread_id, server_context
from graph.context import CONTEXT_FIELDS, Context
from memory_graph_agent.auth.credentials import (
    AuthConfigError,
    AuthFailed,
    Identity,
    Verifier,
    auth_enabled,
    parse_api_keys,
)
from memory_graph_agent.auth.policy import (
    MAINTENANCE_ASSISTANT_ID,
    Forbidden,
    check_forget,
    check_graph,
    check_memory_thread,
    claim,
    is_maintenance,
    keep_owner,
    maintenance_input,
    run_context,
)
from memory_graph_agent.settings import ENV_PATHS, Settings

KEY_A = "sk-alice-0123456789abcdef"
KEY_B = "sk-bob-0123456789abcdef"
SECRET = "s" * 64
# fixed instants: parametrized tokens are built at collection, maybe minutes before use
FUTURE = 4_000_000_000  # 2096
PAST = 1_000_000_000  # 2001


def bearer(value: str) -> dict[bytes, bytes]:
    return {b"authorization": f"Bearer {value}".encode()}


def token(claims: dict, secret: str = SECRET, algorithm: str = "HS256") -> str:
    return jwt.encode(claims, secret, algorithm=algorithm)


@pytest.fixture
def verifier() -> Verifier:
    keys = parse_api_keys(f"{KEY_A}:alice:admin, {KEY_B}:bob  # bob is a user", "test")
    return Verifier(keys, SECRET)


# --- credentials -------------------------------------------------------------------------


def test_api_keys_map_to_users_and_roles(verifier: Verifier) -> None:
    assert verifier.identify(bearer(KEY_A)) == Identity("alice", frozenset({"admin"}))
    assert verifier.identify({b"x-api-key": KEY_B.encode()}) == Identity("bob")
    assert verifier.roles_of("alice") == {"admin"} and verifier.roles_of("bob") == set()


@pytest.mark.parametrize(
    "headers, message",
    [
        ({}, "missing credentials"),
        (bearer("sk-nobody-0123456789abcdef"), "unknown API key"),
        (bearer(KEY_A + "x"), "unknown API key"),
        ({b"authorization": f"Basic {KEY_A}".encode()}, "must be 'Bearer"),
        ({b"authorization": b"Bearer "}, "must be 'Bearer"),
    ],
    ids=["none", "unknown_key", "key_plus_one_char", "basic_scheme", "empty_bearer"],
)
def test_missing_or_unknown_credentials_fail(verifier, headers, message) -> None:
    with pytest.raises(AuthFailed, match=message):
        verifier.identify(headers)


def test_a_valid_jwt_names_the_user_and_its_known_roles(verifier: Verifier) -> None:
    good = token({"sub": "carol", "exp": FUTURE, "roles": ["admin", "pilot"]})
    assert verifier.identify(bearer(good)) == Identity("carol", frozenset({"admin"}))


@pytest.mark.parametrize(
    "jwt_text, message",
    [
        (token({"sub": "carol", "exp": FUTURE}, secret="x" * 64), "Signature"),
        (token({"sub": "carol", "exp": PAST}), "expired"),
        (token({"sub": "carol"}), "exp"),
        (token({"exp": FUTURE}), "sub"),
        (token({"sub": "a:*", "exp": FUTURE}), "invalid user_id"),
        (token({"sub": "default-user", "exp": FUTURE}), "reserved"),
        (token({"sub": "carol", "exp": FUTURE, "roles": "admin"}), "roles"),
        (
            token({"sub": "carol", "exp": FUTURE}, algorithm="HS512"),
            "alg value is not allowed",
        ),
        (
            jwt.encode({"sub": "carol", "exp": FUTURE}, None, algorithm="none"),
            "alg value is not allowed",
        ),
    ],
    ids=[
        "bad_signature",
        "expired",
        "no_exp",
        "no_sub",
        "hostile_sub",
        "reserved_sub",
        "roles_not_a_list",
        "other_algorithm",
        "unsigned",
    ],  # fmt: skip
)
def test_bad_tokens_fail(verifier: Verifier, jwt_text: str, message: str) -> None:
    with pytest.raises(AuthFailed, match=message):
        verifier.identify(bearer(jwt_text))


def test_a_tampered_token_fails(verifier: Verifier) -> None:
    header, _, signature = token({"sub": "carol", "exp": FUTURE}).split(".")
    forged = jwt.utils.base64url_encode(b'{"sub":"alice","exp":9999999999}').decode()
    with pytest.raises(AuthFailed, match="Signature"):
        verifier.identify(bearer(f"{header}.{forged}.{signature}"))


def test_tokens_are_refused_when_no_secret_is_configured() -> None:
    only_keys = Verifier(parse_api_keys(f"{KEY_A}:alice", "test"))
    with pytest.raises(AuthFailed, match="unknown API key"):
        only_keys.identify(bearer(token({"sub": "alice", "exp": FUTURE})))


@pytest.mark.parametrize(
    "text, message",
    [
        ("short:alice", "at least 16"),
        (f"{KEY_A}", "expected <key>:<user_id>"),
        (f"{KEY_A}:alice:admin:x", "expected <key>:<user_id>"),
        (f"{KEY_A}:../x", "invalid user_id"),
        (f"{KEY_A}:default-user", "reserved"),
        (f"{KEY_A}:alice:root", "unknown role"),
        (f"{KEY_A}:alice,{KEY_A}:bob", "listed twice"),
    ],
)
def test_malformed_key_lists_stop_the_server(text: str, message: str) -> None:
    with pytest.raises(AuthConfigError, match=message):
        parse_api_keys(text, "MEMORY_AGENT_API_KEYS")


def test_the_server_needs_some_credentials_unless_auth_is_off(tmp_path) -> None:
    with pytest.raises(AuthConfigError, match="no credentials configured"):
        Verifier.from_env({})
    with pytest.raises(AuthConfigError, match="at least 32"):
        Verifier.from_env({"MEMORY_AGENT_JWT_SECRET": "short"})
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"# the team\n{KEY_B}:bob\n")
    both = Verifier.from_env(
        {"MEMORY_AGENT_API_KEYS": f"{KEY_A}:alice", "MEMORY_AGENT_API_KEYS_FILE": str(keys_file)}
    )
    assert both.identify(bearer(KEY_B)).user_id == "bob"
    with pytest.raises(AuthConfigError, match="differ in roles"):
        Verifier.from_env({"MEMORY_AGENT_API_KEYS": f"{KEY_A}:alice:admin,{KEY_B}:alice"})
    with pytest.raises(AuthConfigError, match="MEMORY_AGENT_API_KEYS_FILE"):
        Verifier.from_env({"MEMORY_AGENT_API_KEYS_FILE": str(tmp_path / "missing")})
    assert auth_enabled({}) and auth_enabled({"MEMORY_AGENT_AUTH": "on"})
    assert not auth_enabled({"MEMORY_AGENT_AUTH": "OFF"})
    with pytest.raises(AuthConfigError, match="'on' or 'off'"):
        auth_enabled({"MEMORY_AGENT_AUTH": "false"})


# --- policy -------------------------------------------------------------------------------


def test_a_run_uses_the_callers_user_id() -> None:
    assert run_context("alice", None) == {"user_id": "alice"}
    assert run_context("alice", {"user_id": "", "recall_mode": "flat"}) == {
        "user_id": "alice",
        "recall_mode": "flat",
    }
    assert run_context("alice", {"user_id": "alice"}) == {"user_id": "alice"}
    with pytest.raises(Forbidden, match="'bob' is not the authenticated user"):
        run_context("alice", {"user_id": "bob"})


def test_a_run_sets_its_context_and_never_a_deployment_setting() -> None:
    """Every field of `Context` may be sent; every setting of `Settings` is refused, by name."""
    sent = {f.name: f.default for f in fields(Context) if f.name != "memory_of"}
    sent["user_id"] = "alice"
    assert run_context("alice", sent)["user_id"] == "alice"
    assert len(CONTEXT_FIELDS) <= 6
    for env, path in ENV_PATHS.items():
        value = Settings()
        for part in path:
            value = getattr(value, part)
        with pytest.raises(Forbidden, match=f"sets {env.lower()}: a deployment setting.*{env}"):
            run_context("alice", {env.lower(): value})


def test_the_groups_and_the_weights_are_refused_as_groups_and_one_by_one() -> None:
    """The tuned weights are the deployment's: a group, part of it, or a weight by name."""
    for context in (
        {"recall_weights": {"neighbour_weight": 0.0}},
        {"recall_weights": {}},
        {"neighbour_weight": 0.0, "model": "local:smollm2"},
        {"weight_recency": 0.5},
        {"window": {"size": 3}},
        {"recall": {}},
    ):
        with pytest.raises(Forbidden, match="a deployment setting") as refused:
            run_context("alice", context)
        named = next(iter(k for k in context if k != "model"))
        assert f"sets {named}:" in str(refused.value)
    with pytest.raises(Forbidden, match=r"\(NEIGHBOUR_WEIGHT, NEIGHBOUR_REACH, .*\)"):
        run_context("alice", {"recall_weights": {}})  # says which variables set it
    # keys that are no field set nothing (the server adds its own, e.g. a fired cron's)
    assert run_context("alice", {"cron_id": "c1"}) == {"cron_id": "c1", "user_id": "alice"}


def test_memory_of_is_accepted_only_as_the_memory_scheduler_sends_it(monkeypatch) -> None:
    """A memory run on the caller's own memory thread of that thread, its context only."""
    monkeypatch.setenv("WINDOW_SIZE", "7")  # the deployment's: not sent (the server's env)
    ctx = Context(user_id="alice", model="local:smollm2", recall_mode="flat")
    config, memory = memory_run(ctx, "t1")
    sent = server_context(memory)
    assert set(sent) == CONTEXT_FIELDS and sent["recall_mode"] == "flat"
    thread = config["configurable"]["thread_id"]
    assert run_context("alice", sent, thread)["memory_of"] == "t1"
    for other in (None, "t1", memory_thread_id("bob", "t1"), memory_thread_id("alice", "t2")):
        with pytest.raises(Forbidden, match="memory_of is set by the memory scheduler"):
            run_context("alice", sent, other)


def test_owners_are_stamped_and_never_handed_over() -> None:
    metadata: dict = {"topic": "x"}
    claim(metadata, "alice")
    assert metadata == {"topic": "x", "owner": "alice"}
    with pytest.raises(Forbidden):
        claim({"owner": "bob"}, "alice")
    keep_owner({"owner": "alice"}, "alice")
    keep_owner(None, "alice")
    with pytest.raises(Forbidden):
        keep_owner({"owner": "bob"}, "alice")


def test_maintenance_of_others_needs_admin() -> None:
    assert is_maintenance("maintenance") and is_maintenance(MAINTENANCE_ASSISTANT_ID)
    assert not is_maintenance("memory_agent")
    # a user may tidy their own memories; the input is pinned to them
    assert maintenance_input("alice", [], {"dry_run": True}, None) == {
        "dry_run": True,
        "user_id": "alice",
        "all_users": False,
    }
    for bad in ({"all_users": True}, {"user_id": "bob"}, None):
        with pytest.raises(Forbidden):
            maintenance_input("alice", [], bad, None)
    with pytest.raises(Forbidden, match="command"):
        maintenance_input("alice", [], {}, {"update": {"all_users": True}})
    assert maintenance_input("root", ["admin"], {"all_users": True}, None) == {"all_users": True}


def test_forgetting_others_and_maintenance_assistants_need_admin() -> None:
    check_forget("alice", [], "alice")
    check_forget("root", ["admin"], "alice")
    with pytest.raises(Forbidden):
        check_forget("alice", [], "bob")
    check_graph("memory_agent", [])
    check_graph("maintenance", ["admin"])
    with pytest.raises(Forbidden):
        check_graph("maintenance", [])


def test_memory_threads_are_only_the_callers_own() -> None:
    """Ids in the memory threads' space, or ``memory_of`` metadata, name the caller's own."""
    import uuid

    from memory_graph_agent.core.memory_threads import is_memory_thread_id, memory_thread_id

    alices = memory_thread_id("alice", "t1")
    assert is_memory_thread_id(alices) and is_memory_thread_id(uuid.UUID(alices))
    assert not any(is_memory_thread_id(uuid.uuid4()) for _ in range(1000))
    assert not is_memory_thread_id("t-1") and not is_memory_thread_id(None)
    check_memory_thread(alices, {"memory_of": "t1"}, "alice")  # her own: allowed
    check_memory_thread(memory_thread_id("alice", "t1", 2), {"memory_of": "t1"}, "alice")
    check_memory_thread(str(uuid.uuid4()), {"topic": "bees"}, "bob")  # an ordinary thread
    check_memory_thread(None, None, "bob")
    refused = [
        (alices, None, "bob"),
        (alices, {"memory_of": "t1"}, "bob"),  # naming her conversation does not help
        (alices, None, "alice"),  # without memory_of, not even hers
        (alices, {"memory_of": "t2"}, "alice"),
        (None, {"memory_of": "t1"}, "bob"),  # a random id posing as a memory thread
        (str(uuid.uuid4()), {"memory_of": "t1"}, "alice"),
        (alices, {"memory_of": ["t1"]}, "alice"),
    ]
    for thread_id, metadata, user in refused:
        with pytest.raises(Forbidden):
            check_memory_thread(thread_id, metadata, user)


def test_a_memory_thread_secret_makes_the_ids_unpredictable(monkeypatch) -> None:
    from memory_graph_agent.core.memory_threads import is_memory_thread_id, memory_thread_id

    monkeypatch.delenv("MEMORY_THREAD_SECRET", raising=False)
    public = memory_thread_id("alice", "t1")
    monkeypatch.setenv("MEMORY_THREAD_SECRET", "s3cret-" * 6)
    keyed = memory_thread_id("alice", "t1")
    assert keyed != public and is_memory_thread_id(keyed)
    assert memory_thread_id("alice", "t1") == keyed  # stable under the same secret
    monkeypatch.setenv("MEMORY_THREAD_SECRET", "other-" * 6)
    assert memory_thread_id("alice", "t1") not in (keyed, public)
    check_memory_thread(memory_thread_id("alice", "t1"), {"memory_of": "t1"}, "alice")
