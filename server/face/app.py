"""Build the MCP server (tools, resources, prompts) and its HTTP app; runs in the server process."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette

from ...evaluator import EvaluatorLike
from ..core import texts
from ..core.config import ServerConfig
from ..core.metrics import Metrics
from ..core.services import Service
from .auth import StoreTokenVerifier
from .ops_http import AccessLog, access_logger, ops_routes
from .prompts import register_prompts
from .resources import register_resources
from .tools import register_tools

INSTRUCTIONS = (
    "adaexplore turns PyTorch modules into fast, correct Triton kernels by tree search. Loop: "
    "get_skill_memory -> expand_node -> write a kernel -> evaluate_kernel -> repeat; best_candidates at the end. "
    "Failing kernels are results with feedback, not errors; to repair one at once, call evaluate_kernel with "
    "parent_node_id=<its node_id> and edits, without an expansion_id. The 'optimize' prompt explains the loop.")
NO_GPU = " This server has no GPU. "

MAX_HTTP_BODY = 1024 * 1024


@dataclass
class HttpSettings:
    host: str = "127.0.0.1"
    port: int = 8765
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)
    max_body_bytes: int = MAX_HTTP_BODY
    access_log: str = "-"
    """'-' for stderr, a file path, or 'off'."""


def build_server(config: ServerConfig, *, evaluator: EvaluatorLike | None = None, http: HttpSettings | None = None,
                 service: Service | None = None) -> tuple[MCPServer, Service]:
    """The MCP server over a service built from `config` (or the one given). Over HTTP every call needs a
    token; the service then runs with a copy of `config` that says so (the given one is left as it is)."""
    if http is not None:
        config = config.model_copy(update={"auth_required": True})
    svc = service or Service(config, evaluator=evaluator)
    kwargs: dict[str, Any] = {}
    if http is not None:
        kwargs["token_verifier"] = StoreTokenVerifier(svc.store)
        kwargs["auth"] = AuthSettings(issuer_url=f"http://{_url_host(http.host)}:{http.port}",
                                      resource_server_url=None, required_scopes=["read"])
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("adaexplore")
    except PackageNotFoundError:
        ver = "0"
    instructions = INSTRUCTIONS + (NO_GPU + texts.INTERPRETER if svc.evaluators.interpreted() else "")
    if config.sandbox is not None:
        instructions += f" Kernel and task code run sandboxed at level '{config.sandbox[0]}': {config.sandbox[1]}."
    mcp = MCPServer("adaexplore", title="adaexplore", version=ver, instructions=instructions,
                    log_level="WARNING", **kwargs)
    register_tools(mcp, svc, config)
    register_resources(mcp, svc, config)
    register_prompts(mcp)
    _time_tools(mcp, svc.metrics)
    return mcp, svc


def _time_tools(mcp: MCPServer, metrics: Metrics) -> None:
    """Record every tool call's latency and errors (unknown tool names share one label)."""
    manager = mcp._tool_manager
    inner = manager.call_tool
    known = {t.name for t in manager.list_tools()}

    async def call_tool(name: str, arguments: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        label = name if name in known else "unknown"
        start = time.perf_counter()
        try:
            return await inner(name, arguments, *args, **kwargs)
        except Exception:
            metrics.tool_errors.labels(label).inc()
            raise
        finally:
            metrics.tool_seconds.labels(label).observe(time.perf_counter() - start)

    manager.call_tool = call_tool  # type: ignore[method-assign]


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def transport_security(http: HttpSettings) -> TransportSecuritySettings:
    """Host/Origin checks against DNS rebinding: loopback names plus what the operator allows."""
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if http.host not in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::"):
        hosts.append(f"{_url_host(http.host)}:*")
        origins.append(f"http://{_url_host(http.host)}:*")
    hosts += http.allowed_hosts
    origins += http.allowed_origins
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


def http_app(mcp: MCPServer, http: HttpSettings, svc: Service) -> Any:
    """The ASGI app: /mcp (bearer tokens), /healthz and /metrics, wrapped in the access log."""
    mcp._custom_starlette_routes.extend(ops_routes(svc))
    app: Starlette = mcp.streamable_http_app(host=http.host, max_request_body_size=http.max_body_bytes,
                                             transport_security=transport_security(http))
    log = access_logger(http.access_log)
    return app if log is None else AccessLog(app, log)


def quiet_stdout_logging(level: int = logging.WARNING) -> None:
    """Route every log record to stderr (stdout belongs to the protocol on stdio)."""
    import sys

    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "stream", None) is sys.stdout:
            root.removeHandler(h)
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    root.setLevel(level)
