"""Evaluation leases: a background thread of each server process renews the leases of the
evaluations it holds and settles the ones whose holder stopped renewing them.

Runs in the server process (one daemon thread per Service). Every evaluation row records its
owner (host:pid:nonce) and an expiry; an owner renews all of its rows every quarter of the
lease. When a server dies (SIGKILL, power loss, a lost container) its leases run out, and the
first surviving server on the same data directory marks those nodes infra_error with a
feedback that says why; resubmitting the same code then runs it again. Nodes are failed, not
re-run, so a kernel that kills servers cannot take every server down in turn. The same thread
checkpoints the database's write-ahead log every second, off the path of tool calls.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from ...evaluator import ErrorInfo, EvalResult, Status
from .tree_store import TreeStore

log = logging.getLogger("adaexplore.server")

EXPIRED = ("the server process that was evaluating this kernel stopped renewing its lease (it crashed or "
           "was killed); another server marked it failed. Submit the same code again to re-run it")
CHECKPOINT_EVERY_S = 1.0
SHUTDOWN = "the server shut down while this kernel was being evaluated; submit the same code again to re-run it"


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def infra_result(error_class: str, message: str) -> tuple[dict, str]:
    """(result dump, feedback) of a node settled by the infrastructure."""
    res = EvalResult(status=Status.infra_error, error=ErrorInfo(error_class=error_class, message=message))
    return res.model_dump(mode="json", exclude_none=True), res.feedback()


class LeaseKeeper:
    """Renews this process's leases and fails expired ones held by others, every `lease_s / 4`;
    checkpoints the write-ahead log every second."""

    def __init__(self, store: TreeStore, owner: str, lease_s: float, on_settled: Callable[[str], None] | None = None):
        self.store, self.owner, self.lease_s = store, owner, lease_s
        self.on_settled = on_settled
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="adx-leases", daemon=True)

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5)

    def _loop(self) -> None:
        next_round = 0.0
        while not self._stop.wait(CHECKPOINT_EVERY_S):
            try:
                self.store.checkpoint()
                if time.monotonic() >= next_round:
                    next_round = time.monotonic() + self.lease_s / 4
                    self.tick()
            except Exception:  # a busy or closing database: try again next round
                log.debug("lease round failed", exc_info=True)

    def tick(self, now: float | None = None) -> list[str]:
        """One round: renew ours, settle expired ones. Returns the node ids this round settled."""
        self.store.renew_leases(self.owner, self.lease_s)
        now = time.time() if now is None else now
        settled = []
        for node_id, owner in self.store.expired_leases(now):
            if owner == self.owner:  # our own rows are renewed above; an old expiry is a clock jump
                continue
            result, feedback = infra_result("LeaseExpired", EXPIRED)
            if self.store.fail_expired(node_id, owner, now, result=result, feedback=feedback):
                log.warning("node %s: the lease of %s expired; marked infra_error (by %s)", node_id, owner, self.owner)
                settled.append(node_id)
                if self.on_settled:
                    self.on_settled(node_id)
        return settled
