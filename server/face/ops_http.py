"""What an operator reads from a running HTTP server: GET /healthz, GET /metrics, the access log.

Runs in the HTTP server process, on its event loop. /healthz answers liveness and readiness
(the store answers a query, the evaluator's state, the GPU it sees) with 200 when ready and
503 when not; /metrics is the Prometheus text format. Neither needs a token: they carry no
code, no token names and no paths. The access log writes one JSON line per HTTP request
(time, method, path, status, duration, the token's name; never a token).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..core.evaluation import gpu_visible
from ..core.files import FILE_MODE
from ..core.metrics import CONTENT_TYPE
from ..core.services import Service

HEALTH_TIMEOUT_S = 2.0


def health(svc: Service) -> dict[str, Any]:
    """Liveness and readiness of this process (blocking: run it on a worker thread)."""
    report: dict[str, Any] = {"live": True}
    try:
        svc.store.ping()
        report["store"] = {"ok": True}
    except Exception as exc:  # a locked, missing or corrupt database
        report["store"] = {"ok": False, "error": type(exc).__name__}
    ev = svc.evaluators
    if ev.started:
        device = ev.device
        report["evaluator"] = {"ok": True, "state": "running", "queue_depth": svc.queue_depth()}
        report["gpu"] = {"ok": True, "device": device, "present": not device.startswith("cpu")}
    else:
        report["evaluator"] = {"ok": True, "state": "starts on the first evaluation", "queue_depth": 0}
        report["gpu"] = {"ok": True, "device": None, "present": gpu_visible()}
    report["stopping"] = svc.stopping
    report["ready"] = report["store"]["ok"] and not svc.stopping
    report["status"] = "ok" if report["ready"] else ("stopping" if svc.stopping else "unavailable")
    return report


def ops_routes(svc: Service) -> list[Route]:
    async def healthz(_request: Request) -> Response:
        try:
            with anyio.fail_after(HEALTH_TIMEOUT_S):
                report = await anyio.to_thread.run_sync(health, svc, abandon_on_cancel=True)
        except TimeoutError:
            report = {"live": True, "ready": False, "status": "unavailable",
                      "store": {"ok": False, "error": f"no answer within {HEALTH_TIMEOUT_S} s"}}
        return JSONResponse(report, status_code=200 if report["ready"] else 503)

    async def metrics(_request: Request) -> Response:
        body = await anyio.to_thread.run_sync(svc.metrics.render)
        return Response(body, media_type=CONTENT_TYPE)

    return [Route("/healthz", healthz, methods=["GET"]), Route("/metrics", metrics, methods=["GET"])]


def access_logger(target: str) -> logging.Logger | None:
    """A logger that writes bare lines to stderr ('-'), to a file (created 0600), or nowhere ('off')."""
    if target == "off":
        return None
    log = logging.getLogger("adaexplore.access")
    log.propagate = False
    log.setLevel(logging.INFO)
    for h in list(log.handlers):
        log.removeHandler(h)
    if target == "-":
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
    else:
        path = Path(target).expanduser()
        os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, FILE_MODE))
        handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    return log


class AccessLog:
    """ASGI middleware: one JSON line per HTTP request once its response has ended."""

    def __init__(self, app: Any, log: logging.Logger):
        self.app, self.log = app, log

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 0

        async def send_status(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            user = scope.get("user")
            token = getattr(getattr(user, "access_token", None), "client_id", None)
            client = scope.get("client")
            self.log.info(orjson.dumps({
                "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                "method": scope.get("method"), "path": scope.get("path"), "status": status,
                "duration_ms": round((time.perf_counter() - start) * 1000, 2), "token": token,
                "client": client[0] if client else None}).decode())
