"""MCP resources: task sources, node code, the skill memory, a task's tree (server process).

Plain functions, which the SDK runs on worker threads."""

from __future__ import annotations

from typing import TypeVar

import orjson
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from ...common.vocab import PENDING
from ..core.config import ServerConfig
from ..core.services import Service
from .auth import current_caller


def register_resources(mcp: MCPServer, svc: Service, cfg: ServerConfig) -> None:
    """Register the resources on `mcp`, read from `svc` under the settings `cfg`."""

    def check() -> None:
        if "read" not in current_caller(cfg.auth_required, cfg.default_caller).scopes:
            raise ResourceError("reading resources needs the 'read' scope")

    @mcp.resource("adaexplore://tasks/{task_id}/reference", mime_type="text/x-python",
                  description="the reference PyTorch module of a task")
    def task_reference(task_id: str) -> str:
        check()
        return _found(svc.store.get_task(task_id), f"unknown task {task_id!r}").source

    @mcp.resource("adaexplore://nodes/{node_id}/code", mime_type="text/x-python",
                  description="the source of one node (candidate kernel)")
    def node_code(node_id: str) -> str:
        check()
        return _found(svc.store.get_node(node_id), f"unknown node {node_id!r}").source or ""

    @mcp.resource("adaexplore://memory", mime_type="text/markdown",
                  description="the team's skill memory: active validity rules, rendered")
    def memory() -> str:
        check()
        view = svc.memory.view(None, 4000, False)
        return view.rendered or "(no active rules yet)"

    @mcp.resource("adaexplore://tasks/{task_id}/tree", mime_type="application/json",
                  description="all nodes of a task's search tree (no code) as JSON")
    def task_tree(task_id: str) -> str:
        check()

        def build() -> bytes:
            try:
                _, rows, entry = svc.cache.rows(task_id)
            except KeyError:
                raise ResourceNotFoundError(f"unknown task {task_id!r}") from None
            return orjson.dumps({"task_id": task_id, "nodes": [
                {"id": r.id, "parent_id": r.parent_id, "action": r.action,
                 "status": PENDING if r.status is None else r.status, "speedup": r.speedup, "reward": r.reward,
                 "seq": r.seq, "depth": entry.depth.get(r.id, 0)} for r in rows]})

        return build().decode()


T = TypeVar("T")


def _found(row: T | None, missing: str) -> T:
    """`row`, or the resource error that says it is `missing`."""
    if row is None:
        raise ResourceNotFoundError(missing)
    return row
