"""A thread of its own that starts the evaluator's long-lived helper processes (the warm parent,
the judge); runs in the evaluator's process.

Those processes ask for a parent-death signal, so a server killed outright takes them with it
(a judge stopped for a measurement could not notice on its own, and would keep its device memory).
Linux sends that signal when the *thread* that started the child ends, and callers' threads come
and go (a server's worker threads end when idle): a child started here lives as long as its
owner keeps this thread, and dies with the process."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


class Launcher:
    """Runs start functions, one at a time, on one thread that lives until `close()`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()

    def call(self, start: Callable[[], T]) -> T:
        """`start()`, run on the launcher's thread (started if need be); its result or its exception."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._requests = queue.SimpleQueue()
                self._thread = threading.Thread(target=self._serve, args=(self._requests,), daemon=True,
                                                name=self.name)
                self._thread.start()
            requests = self._requests
        future: Future[T] = Future()
        requests.put((start, future))
        return future.result()

    def close(self) -> None:
        """End the thread (the children it started get their parent-death signal)."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._requests.put(None)

    @staticmethod
    def _serve(requests: queue.SimpleQueue) -> None:
        while (request := requests.get()) is not None:
            start, future = request
            try:
                future.set_result(start())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)
