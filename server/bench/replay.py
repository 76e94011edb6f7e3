"""A scripted OpenAI-compatible chat endpoint on loopback that answers from a folder of kernels.

Runs in a thread of the bench process (`--driver replay`) or of a test. It stands in for a model: the bench
reaches it through the same `openai` client and the same checks as a real endpoint, so a replay run exercises
everything but the model. Layout of the folder: one subfolder per task, named as the task (the task file's
stem), holding candidate modules; the request for step n of a task (its "Step n of N" line) is answered with
the task's n-th file in name order, cycling (without that line, the n-th request is). A request to write a new
task (the Adapt stage) gets the next file of the folder's `_synthetic` subfolder, one for a rule a fixed rule,
one asking whether stored rules say the same thing "none", the availability probe "OK". It checks the bearer key.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

_TASK = re.compile(r"^Task name: (\S+)", re.M)
_STEP = re.compile(r"^Step (\d+) of \d+", re.M)
RULE_ANSWER = "Rule: declare every block size used by tl.arange as a tl.constexpr parameter; do not pass a runtime int."


class ReplayEndpoint:
    """The endpoint's state: the folder, the key it accepts and how many answers each task has had."""

    def __init__(self, folder: Path, api_key: str | None = None, port: int = 0):
        self.folder = folder
        self.api_key = api_key or secrets.token_hex(8)
        self.counts: dict[str, int] = {}
        self.requests = 0
        self.rule_requests = 0
        self.seen: list[str] = []  # the user messages asked, in order
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="replay-endpoint", daemon=True)

    @property
    def base_url(self) -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/v1"

    def __enter__(self) -> ReplayEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def files(self, task: str) -> list[Path]:
        d = self.folder / task
        return sorted(d.glob("*.py")) if d.is_dir() else []

    def answer(self, messages: list[dict[str, Any]]) -> str:
        """The scripted answer to a conversation."""
        text = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        with self._lock:
            self.seen.append(text)
        if text.strip() == "Reply with OK.":
            return "OK"
        if "The memory holds rules close" in text:
            return "none"
        if "A kernel you wrote failed" in text:
            with self._lock:
                self.rule_requests += 1
            return RULE_ANSWER
        m = _TASK.search(text)
        task = m.group(1) if m else ""
        if "Write one new task" in text:
            task = "_synthetic"
        files = self.files(task) if task else []
        if not files:
            return "I have no kernel for this task."
        with self._lock:
            n = self.counts.get(task, 0)
            self.counts[task] = n + 1
        step = _STEP.search(text)
        if step and task != "_synthetic":
            n = int(step.group(1)) - 1
        return "Here is the kernel.\n\n```python\n" + files[n % len(files)].read_text() + "```\n"


def _handler(ep: ReplayEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  # the base class's name
            pass  # quiet: the bench's own output is what a user reads

        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = orjson.dumps(body)
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if self.headers.get("Authorization", "") == f"Bearer {ep.api_key}":
                return True
            self._send(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                       "code": "invalid_api_key"}})
            return False

        def do_GET(self) -> None:
            if not self._authorized():
                return
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": "replay", "object": "model", "owned_by": "bench"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0") or 0)
            body = orjson.loads(self.rfile.read(length) or b"{}")
            if not self._authorized():
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            with ep._lock:
                ep.requests += 1
            messages = body.get("messages", [])
            text = ep.answer(messages)
            prompt_tokens = sum(len(str(m.get("content", ""))) for m in messages) // 4
            done = len(text) // 4
            self._send(200, {"id": f"chatcmpl-{secrets.token_hex(6)}", "object": "chat.completion",
                             "created": int(time.time()), "model": body.get("model", "replay"),
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": text}}],
                             "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": done,
                                       "total_tokens": prompt_tokens + done}})

    return Handler
