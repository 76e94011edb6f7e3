"""Bearer tokens (stored hashed, with ranked scopes) and the caller of a tool call; runs in the server process."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

import anyio.to_thread
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from ..core.tree_store import TreeStore

SCOPES = ("read", "write", "admin")
TOKEN_PREFIX = "adx_"
_NAME_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


class ScopeError(PermissionError):
    """The caller's token lacks a scope the tool needs."""


def implied_scopes(scopes: list[str]) -> list[str]:
    """Scopes are ranked: admin includes write, write includes read."""
    ranks = [SCOPES.index(s) for s in scopes if s in SCOPES]
    return list(SCOPES[: max(ranks) + 1]) if ranks else []


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_scopes(text: str) -> list[str]:
    scopes = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in scopes if s not in SCOPES]
    if bad or not scopes:
        raise ValueError(f"scopes must be a comma-separated subset of {','.join(SCOPES)}; got {text!r}")
    return sorted(set(scopes), key=SCOPES.index)


def issue_token(store: TreeStore, name: str, scopes: list[str]) -> str:
    """Create a token; only its hash is kept, so the returned text is shown once."""
    if not _NAME_RE.match(name):
        raise ValueError("token names use letters, digits and _.@- (1 to 64 characters)")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    store.add_token(name, hash_token(token), scopes)
    return token


class StoreTokenVerifier:
    """The SDK's TokenVerifier over the tokens table (client_id = token name)."""

    def __init__(self, store: TreeStore):
        self.store = store

    async def verify_token(self, token: str) -> AccessToken | None:
        if not token or len(token) > 200:
            return None
        found = await anyio.to_thread.run_sync(self.store.find_token, hash_token(token))
        if found is None:
            return None
        name, scopes = found
        return AccessToken(token="", client_id=name, scopes=implied_scopes(scopes))


@dataclass(frozen=True)
class Caller:
    name: str
    scopes: frozenset[str]

    def require(self, scope: str) -> None:
        if scope not in self.scopes:
            raise ScopeError(
                f"this call needs the '{scope}' scope; the token '{self.name}' has "
                f"{', '.join(sorted(self.scopes)) or 'none'}. Ask an admin for a token with --scopes {scope}")


def current_caller(auth_required: bool, default_name: str = "local") -> Caller:
    """Who is calling: the bearer token's name on HTTP, `default_name` (all scopes) on stdio."""
    token = get_access_token()
    if token is not None:
        return Caller(token.client_id, frozenset(token.scopes))
    if auth_required:
        return Caller("anonymous", frozenset())
    return Caller(default_name, frozenset(SCOPES))
