"""The server's face: the `adaexplore` command and what embeds the MCP server in another program.

Imported in the server process and in CLI commands. `main` is the console script; `build_server`
makes the MCP server and its application core (`Service`) from one `ServerConfig`; `http_app`,
`serve_http` and `serve_stdio` run it. Each name loads on first use (see `_HOMES`), so that
importing the core alone never loads MCP. The server lives in two rooms: `core/` (the
application, which never imports MCP) and `face/` (the MCP server and the CLI over it).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core.config import ServerConfig
    from .core.errors import InvalidRequest, NotFound, ServiceError, Unavailable
    from .core.services import Service
    from .face.app import HttpSettings, build_server, http_app
    from .face.cli import main
    from .face.serving import serve_http, serve_stdio

__all__ = [
    "HttpSettings",
    "InvalidRequest",
    "NotFound",
    "ServerConfig",
    "Service",
    "ServiceError",
    "Unavailable",
    "build_server",
    "http_app",
    "main",
    "serve_http",
    "serve_stdio",
]

_HOMES = {
    "HttpSettings": ".face.app",
    "InvalidRequest": ".core.errors",
    "NotFound": ".core.errors",
    "ServerConfig": ".core.config",
    "Service": ".core.services",
    "ServiceError": ".core.errors",
    "Unavailable": ".core.errors",
    "build_server": ".face.app",
    "http_app": ".face.app",
    "main": ".face.cli",
    "serve_http": ".face.serving",
    "serve_stdio": ".face.serving",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_HOMES[name], __name__), name)
    globals()[name] = value  # the next lookup finds it without coming here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
