"""The server of one compared variant: `adaexplore serve` over stdio, reached with the MCP SDK's client.

Runs in the bench process; the server is a subprocess with its own data directory, started exactly as an
external agent's client starts it. Tool errors (caller mistakes) raise ToolCallError with the server's message.
"""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

from mcp import Client, StdioServerParameters
from mcp_types import TextContent


class ToolCallError(RuntimeError):
    """A tool answered with an error (its message is the server's)."""


def server_params(data_dir: Path, device: str | None = None, extra: list[str] | None = None) -> StdioServerParameters:
    """How to start the server of one variant: this interpreter, the installed CLI, stdio transport."""
    args = ["-m", "adaexplore.server.face.cli", "serve", "--data-dir", str(data_dir)]
    if device:
        args += ["--device", device]
    env = dict(os.environ)
    env.setdefault("PYTHONWARNINGS", "ignore")
    # Every step's verdict then carries the torch.compile figure; otherwise a task's first steps can come back
    # before torch.compile is timed, and its best kernel may have no figure against it.
    env.setdefault("ADAEXPLORE_WAIT_FOR_COMPILE", "1")
    return StdioServerParameters(command=sys.executable, args=args + list(extra or []), env=env)


class ToolSession:
    """Calls to the tools and prompts of one server, answered as plain dicts."""

    def __init__(self, client: Client):
        self.client = client

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """Call tool `name`; its structured content, or ToolCallError with the server's message."""
        res = await self.client.call_tool(name, {k: v for k, v in args.items() if v is not None})
        if res.is_error:
            text = next((c.text for c in res.content if isinstance(c, TextContent)), "")
            raise ToolCallError(f"{name}: {text}")
        return dict(res.structured_content or {})

    async def prompt(self, name: str, args: dict[str, str]) -> str:
        """The text of a server prompt (its messages joined)."""
        got = await self.client.get_prompt(name, args)
        parts = [m.content.text for m in got.messages if isinstance(m.content, TextContent)]
        return "\n\n".join(parts)


@asynccontextmanager
async def open_session(data_dir: Path, device: str | None = None, extra: list[str] | None = None,
                       timeout_s: float = 600.0) -> AsyncIterator[ToolSession]:
    """A started server and a connected client, stopped on exit."""
    data_dir.mkdir(parents=True, exist_ok=True)
    async with Client(server_params(data_dir, device, extra), read_timeout_seconds=timeout_s) as client:
        yield ToolSession(client)
