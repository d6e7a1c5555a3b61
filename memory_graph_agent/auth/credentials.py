"""Credentials to identities: API keys mapped to users, or HS256 JWTs.

The server reads its credentials once, at start, from the environment:

- ``MEMORY_AGENT_API_KEYS``: entries ``<key>:<user_id>[:<role>+<role>...]`` separated by
  commas or newlines (``sk-ada-4f9c...:ada:admin,sk-bob-77aa...:bob``);
- ``MEMORY_AGENT_API_KEYS_FILE``: a file of such entries, one per line (``#`` comments);
- ``MEMORY_AGENT_JWT_SECRET``: accept JWTs signed with HS256 by this secret; ``sub`` is
  the user id, ``roles`` (a list) the roles, ``exp`` is required.
  ``MEMORY_AGENT_JWT_AUDIENCE`` / ``MEMORY_AGENT_JWT_ISSUER`` are checked when set.

A request carries its key or token as ``Authorization: Bearer <key or token>`` or as
``x-api-key: <key>`` (what ``langgraph_sdk.get_client(api_key=...)`` sends).
``MEMORY_AGENT_AUTH=off`` turns authentication off (a single-user laptop); anything else
but ``on`` is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import jwt

from memory_graph_agent.core.ids import InvalidIdError, validate_id
from memory_graph_agent.core.server_token import ServerTokenError, check_server_token

MIN_KEY_LENGTH = 16
# `graph.context.Context` treats its default user id as "unset" and reads USER_ID instead:
# an identity with that name could run as whoever USER_ID names on the server.
RESERVED_USER_IDS = frozenset({"default-user"})
ROLES = frozenset({"admin"})


class AuthFailed(Exception):
    """The request carries no credentials, or credentials that are not valid (401)."""


class AuthConfigError(ValueError):
    """The server's credential settings are missing or malformed (the server must not start)."""


@dataclass(frozen=True)
class Identity:
    """An authenticated caller: the user id every run of theirs uses, and their roles."""

    user_id: str
    roles: frozenset[str] = frozenset()


def auth_enabled(env: Mapping[str, str] = os.environ) -> bool:
    """Whether ``MEMORY_AGENT_AUTH`` leaves authentication on (the default)."""
    mode = env.get("MEMORY_AGENT_AUTH", "on").strip().lower()
    if mode not in ("on", "off"):
        raise AuthConfigError(f"MEMORY_AGENT_AUTH must be 'on' or 'off', got {mode!r}")
    return mode == "on"


def _identity(user_id: str, roles: Iterable[str], where: str) -> Identity:
    try:
        validate_id(user_id, "user_id")
    except InvalidIdError as exc:
        raise AuthConfigError(f"{where}: {exc}") from None
    if user_id in RESERVED_USER_IDS:
        raise AuthConfigError(f"{where}: user id {user_id!r} is reserved")
    roles = frozenset(r for r in roles if r)
    if unknown := roles - ROLES:
        raise AuthConfigError(f"{where}: unknown role(s) {sorted(unknown)}; known: {sorted(ROLES)}")
    return Identity(user_id, roles)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def parse_api_keys(text: str, source: str) -> dict[bytes, Identity]:
    """Parse ``<key>:<user_id>[:<role>+...]`` entries into {sha256(key): identity}."""
    keys: dict[bytes, Identity] = {}
    entries = [e.split("#", 1)[0].strip() for line in text.splitlines() for e in line.split(",")]
    for n, entry in enumerate((e for e in entries if e), start=1):
        where = f"{source} entry {n}"
        parts = entry.split(":")
        if len(parts) not in (2, 3):
            raise AuthConfigError(f"{where}: expected <key>:<user_id>[:<roles>]")
        key, user_id = parts[0].strip(), parts[1].strip()
        if len(key) < MIN_KEY_LENGTH:
            raise AuthConfigError(f"{where}: keys need at least {MIN_KEY_LENGTH} characters")
        roles = parts[2].split("+") if len(parts) == 3 else []
        digest = _digest(key)
        if digest in keys:
            raise AuthConfigError(f"{where}: the same key is listed twice")
        keys[digest] = _identity(user_id, (r.strip() for r in roles), where)
    return keys


class Verifier:
    """Checks a request's credentials against the keys and the JWT secret it was given."""

    def __init__(
        self,
        api_keys: Mapping[bytes, Identity] | None = None,
        jwt_secret: str | None = None,
        audience: str | None = None,
        issuer: str | None = None,
    ) -> None:
        self._keys = dict(api_keys or {})
        self._roles: dict[str, frozenset[str]] = {}
        for identity in self._keys.values():  # roles belong to the user, not to one key
            if self._roles.setdefault(identity.user_id, identity.roles) != identity.roles:
                raise AuthConfigError(f"the keys of user {identity.user_id!r} differ in roles")
        self._secret = jwt_secret or None
        self._audience = audience or None
        self._issuer = issuer or None
        if not self._keys and not self._secret:
            raise AuthConfigError(
                "no credentials configured: set MEMORY_AGENT_API_KEYS (or "
                "MEMORY_AGENT_API_KEYS_FILE) or MEMORY_AGENT_JWT_SECRET, or set "
                "MEMORY_AGENT_AUTH=off on a single-user machine"
            )
        if self._secret is not None and len(self._secret) < 32:
            raise AuthConfigError("MEMORY_AGENT_JWT_SECRET needs at least 32 characters")

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Verifier:
        """Build the verifier from ``MEMORY_AGENT_*`` variables (see the module docstring).

        ``MEMORY_AGENT_SERVER_URL`` needs the JWT secret: the scheduler signs its tokens
        with it (`memory_graph_agent.core.server_token`).
        """
        try:
            check_server_token(env)
        except ServerTokenError as exc:
            raise AuthConfigError(str(exc)) from None
        keys = parse_api_keys(env.get("MEMORY_AGENT_API_KEYS", ""), "MEMORY_AGENT_API_KEYS")
        if path := env.get("MEMORY_AGENT_API_KEYS_FILE"):
            try:
                text = Path(path).read_text()
            except OSError as exc:
                raise AuthConfigError(f"MEMORY_AGENT_API_KEYS_FILE: {exc}") from None
            from_file = parse_api_keys(text, path)
            if dup := keys.keys() & from_file.keys():
                raise AuthConfigError(f"{path}: {len(dup)} key(s) also in MEMORY_AGENT_API_KEYS")
            keys.update(from_file)
        return cls(
            keys,
            env.get("MEMORY_AGENT_JWT_SECRET"),
            env.get("MEMORY_AGENT_JWT_AUDIENCE"),
            env.get("MEMORY_AGENT_JWT_ISSUER"),
        )

    def roles_of(self, user_id: str) -> frozenset[str]:
        """Roles the API keys give ``user_id`` (a cron's run only carries its user id)."""
        return self._roles.get(user_id, frozenset())

    def identify(self, headers: Mapping[bytes, bytes] | Mapping[str, str]) -> Identity:
        """The identity of a request's headers (bytes or str), or `AuthFailed`."""
        credential = _credential(headers)
        if credential is None:
            raise AuthFailed("missing credentials: send 'Authorization: Bearer <key>'")
        digest = _digest(credential)
        for known, identity in self._keys.items():  # constant time per key
            if hmac.compare_digest(known, digest):
                return identity
        if self._secret is not None and credential.count(".") == 2:
            return self._decode(credential)
        raise AuthFailed("unknown API key")

    def _decode(self, token: str) -> Identity:
        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=["HS256"],
                audience=self._audience,
                issuer=self._issuer,
                options={"require": ["exp", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise AuthFailed(f"invalid token: {exc}") from None
        roles = claims.get("roles") or []
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise AuthFailed("invalid token: 'roles' must be a list of strings")
        try:
            return _identity(str(claims["sub"]), (r for r in roles if r in ROLES), "token")
        except AuthConfigError as exc:
            raise AuthFailed(f"invalid token: {exc}") from None


def _text(value: bytes | str) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _credential(headers: Mapping[bytes, bytes] | Mapping[str, str]) -> str | None:
    """The bearer key or token, whichever shape the engine passes (LangGraph: bytes, Aegra: str)."""
    wanted = ("authorization", "x-api-key")
    found = {
        k: _text(v) for k, v in ((_text(k).lower(), v) for k, v in headers.items()) if k in wanted
    }
    if raw := found.get("authorization"):
        scheme, _, value = raw.strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise AuthFailed("the Authorization header must be 'Bearer <key or token>'")
        return value.strip()
    if raw := found.get("x-api-key"):
        return raw.strip() or None
    return None
