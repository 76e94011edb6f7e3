"""MCP resources: task sources, node code, the skill memory, a task's tree."""

from __future__ import annotations

import anyio.to_thread
import orjson
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from .auth import current_caller
from .service import Service


def register_resources(mcp: MCPServer, svc: Service) -> None:
    cfg = svc.config

    def check() -> None:
        if "read" not in current_caller(cfg.auth_required, cfg.default_caller).scopes:
            raise ResourceError("reading resources needs the 'read' scope")

    @mcp.resource("adaexplore://tasks/{task_id}/reference", mime_type="text/x-python",
                  description="the reference PyTorch module of a task")
    async def task_reference(task_id: str) -> str:
        check()
        task = await anyio.to_thread.run_sync(svc.store.get_task, task_id)
        if task is None:
            raise ResourceNotFoundError(f"unknown task {task_id!r}")
        return task["source"]

    @mcp.resource("adaexplore://nodes/{node_id}/code", mime_type="text/x-python",
                  description="the source of one node (candidate kernel)")
    async def node_code(node_id: str) -> str:
        check()
        node = await anyio.to_thread.run_sync(svc.store.get_node, node_id)
        if node is None:
            raise ResourceNotFoundError(f"unknown node {node_id!r}")
        return node["source"]

    @mcp.resource("adaexplore://memory", mime_type="text/markdown",
                  description="the team's skill memory: active validity rules, rendered")
    async def memory() -> str:
        check()
        view = await anyio.to_thread.run_sync(lambda: svc.memory.view(None, 4000, False))
        return view.rendered or "(no active rules yet)"

    @mcp.resource("adaexplore://tasks/{task_id}/tree", mime_type="application/json",
                  description="all nodes of a task's search tree (no code) as JSON")
    async def task_tree(task_id: str) -> str:
        check()

        def build() -> bytes:
            try:
                _, rows, entry = svc.cache.rows(task_id)
            except KeyError:
                raise ResourceNotFoundError(f"unknown task {task_id!r}") from None
            return orjson.dumps({"task_id": task_id, "nodes": [
                {"id": r.id, "parent_id": r.parent_id, "action": r.action,
                 "status": "pending" if r.status is None else r.status, "speedup": r.speedup, "reward": r.reward,
                 "seq": r.seq, "depth": entry.depth.get(r.id, 0)} for r in rows]})

        return (await anyio.to_thread.run_sync(build)).decode()
