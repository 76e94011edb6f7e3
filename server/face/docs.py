"""The README's tool table, generated from the live server so the two cannot drift.

Runs in its own process (a developer's shell, or a test), which builds a server in memory:

    python -m adaexplore.server.face.docs          # print the table
    python -m adaexplore.server.face.docs --write  # rewrite it in README.md in place
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import anyio

START, END = "<!-- tools:start -->", "<!-- tools:end -->"


async def _tools() -> list:
    from mcp import Client

    from ..core.config import ServerConfig
    from .app import build_server

    with tempfile.TemporaryDirectory() as tmp:
        mcp, svc = build_server(ServerConfig(data_dir=Path(tmp)))
        try:
            async with Client(mcp) as client:
                return list((await client.list_tools()).tools)
        finally:
            svc.close()


def _kind(tool) -> str:
    a = tool.annotations
    if a is None:
        return "?"
    if a.read_only_hint:
        return "read-only"
    if a.destructive_hint:
        return "destructive"
    return "writes, idempotent" if a.idempotent_hint else "writes"


def tool_table() -> str:
    """A markdown table of every tool: name, what it does, how it touches state."""
    rows = ["| tool | what it does | effect |", "| --- | --- | --- |"]
    for tool in sorted(anyio.run(_tools), key=lambda t: t.name):
        first = " ".join((tool.description or "").strip().split("\n\n")[0].split())
        rows.append(f"| `{tool.name}` | {first.replace('|', '/')} | {_kind(tool)} |")
    return "\n".join(rows)


def replace_in(text: str, table: str) -> str:
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"no {START} ... {END} block")
    return pattern.sub(lambda _m: f"{START}\n{table}\n{END}", text)


def main() -> None:
    table = tool_table()
    if "--write" in sys.argv:
        readme = Path(__file__).resolve().parents[2] / "README.md"
        readme.write_text(replace_in(readme.read_text(), table))
    else:
        print(table)


if __name__ == "__main__":
    main()
