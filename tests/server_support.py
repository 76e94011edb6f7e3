"""Shared helpers of the server tests: example files, subprocess servers, HTTP clients."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SOFTMAX = (EXAMPLES / "tasks" / "softmax.py").read_text()
VARIANTS = EXAMPLES / "kernels" / "variants"


def variant(prefix: str) -> str:
    return next(VARIANTS.glob(prefix + "*.py")).read_text()


def compile_error_kernel(tag: str = "") -> str:
    """A candidate that fails static checks in milliseconds; `tag` makes it unique."""
    return variant("01") + f"\n# variant {tag}\n"


SLEEPY = '''
import time
import torch
import triton
import triton.language as tl

time.sleep(120)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.setdefault("TRITON_INTERPRET", "1")
    e["PYTHONWARNINGS"] = "ignore"
    return e


def cli(*args: str, timeout: float = 300, data_dir: Path | None = None) -> subprocess.CompletedProcess:
    extra = ["--data-dir", str(data_dir)] if data_dir else []
    return subprocess.run([sys.executable, "-m", "adaexplore.server.face.cli", *args, *extra], capture_output=True,
                          text=True, timeout=timeout, env=env())


def issue_token(data_dir: Path, name: str, scopes: str) -> str:
    """A bearer token issued through the real CLI, as an operator would."""
    out = cli("token", "issue", name, "--scopes", scopes, data_dir=data_dir)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


class HttpServer:
    """`adaexplore serve --http` in its own process group on a free loopback port."""

    def __init__(self, data_dir: Path, *extra: str):
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.extra = extra
        self.proc: subprocess.Popen | None = None

    def start(self) -> HttpServer:
        self.log = open(self.data_dir / f"server-{self.port}.log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "adaexplore.server.face.cli", "serve", "--http", "--port", str(self.port),
             "--data-dir", str(self.data_dir), *self.extra],
            stdout=self.log, stderr=self.log, env=env(), start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("server did not start")

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Send `sig` to the server process alone (as systemd would) and return its exit code."""
        assert self.proc is not None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        finally:
            self.kill()
            self.log.close()

    def log_text(self) -> str:
        return (self.data_dir / f"server-{self.port}.log").read_text(errors="replace")

    def log_text_once(self, needle: str, timeout: float = 10.0) -> str:
        """The log once it holds `needle`: access lines are written after a response ends,
        so a client can have its answer a moment before the line is there."""
        deadline = time.monotonic() + timeout
        while needle not in (text := self.log_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return text

    def kill(self) -> None:
        """SIGKILL the server and everything it started (its own process group)."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


@asynccontextmanager
async def http_client(url: str, token: str | None, **kwargs):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as hc:
        async with Client(streamable_http_client(url, http_client=hc), **kwargs) as client:
            yield client


def in_memory(mcp, fn):
    """Run `fn(client)` against `mcp` through an in-memory MCP client; its return value."""
    async def main():
        async with Client(mcp) as c:
            return await fn(c)
    return anyio.run(main)


async def tool(c, name, args=None):
    """Call a tool that must succeed; its structured content."""
    res = await c.call_tool(name, args or {})
    assert not res.is_error, (name, res.content[0].text)
    return res.structured_content
