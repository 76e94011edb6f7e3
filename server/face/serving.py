"""Running `adaexplore serve` until SIGTERM or SIGINT, then stopping cleanly with exit code 0.

Runs in the server process, on its main thread. On a signal the server stops taking
evaluations, lets the HTTP connections end (a few seconds at most), gives running
evaluations the shutdown grace to finish, marks the rest infra_error (resubmitting the code
runs it again), closes the stores and returns 0. A second signal during the wait skips it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.to_thread
import uvicorn

from ..core.services import Service

log = logging.getLogger("adaexplore.server")

HTTP_DRAIN_S = 3
STDIO_EXIT_WAIT_S = 2.0
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class _GracefulServer(uvicorn.Server):
    """uvicorn's server without its re-raise of the caught signal (that would kill us before cleanup)."""

    def __init__(self, config: uvicorn.Config, svc: Service):
        super().__init__(config)
        self.svc = svc

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self._on_signal) for sig in SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, sig: int, frame: Any) -> None:
        if self.svc.stopping:  # a second signal: stop waiting for connections
            self.force_exit = True
        log.warning("%s: stopping (no new evaluations)", signal.Signals(sig).name)
        self.svc.stop_accepting()
        self.handle_exit(sig, frame)


def serve_http(app: Any, svc: Service, *, host: str, port: int) -> int:
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=HTTP_DRAIN_S, lifespan="on")
    server = _GracefulServer(config, svc)
    try:
        server.run()
    finally:
        _settle(svc)
    return 0


def serve_stdio(mcp: Any, svc: Service) -> int:
    """Serve over stdio until the client closes stdin or a signal arrives."""

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            async def on_signal() -> None:
                with anyio.open_signal_receiver(*SIGNALS) as signals:
                    async for sig in signals:
                        log.warning("%s: stopping (no new evaluations)", signal.Signals(sig).name)
                        break
                svc.stop_accepting()
                await anyio.to_thread.run_sync(_settle, svc)
                # stdin is read on a thread that a cancel cannot interrupt: leave if it does not end soon
                timer = threading.Timer(STDIO_EXIT_WAIT_S, _exit_now)
                timer.daemon = True
                timer.start()
                tg.cancel_scope.cancel()

            tg.start_soon(on_signal)
            await mcp.run_stdio_async()
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    finally:
        _settle(svc)
    return 0


def _settle(svc: Service) -> None:
    try:
        svc.shutdown()
    except Exception:
        log.exception("shutdown failed")


def _exit_now() -> None:
    sys.stderr.flush()
    os._exit(0)
