"""The operations behind the tools: tasks, the search tree, evaluations and the skill memory.

Runs in the server process (and in CLI commands that change state). Plain blocking methods
(tools call them on worker threads). Caller mistakes raise ToolError
with a message that says how to fix the call; a failing kernel is a result, never an error.

The logic is split by concern: service_tree (tasks and reading the tree), service_search
(expansion, submission, evaluation) and service_memory (skill memory, synthesis, failure rules).
"""

from __future__ import annotations

import logging
import random
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any

from ..evaluator.results import EvalProtocol
from ..search import SearchParams
from .config import ServerConfig
from .evaluation import EvaluatorHolder, lower_priority
from .inputs import scrub_pairs
from .leases import SHUTDOWN, LeaseKeeper, infra_result, new_owner
from .memory import MemoryAdapter
from .metrics import Metrics
from .models import TaskFacts
from .service_memory import MemoryOps
from .service_search import SearchOps
from .store import Store
from .treecache import TreeCache

log = logging.getLogger("adaexplore.server")

MAX_SEED_TASKS = 3


class Service(SearchOps, MemoryOps):
    """Every tool's operation: the state lives here, the methods come from the mixins."""

    def __init__(self, config: ServerConfig, *, evaluator: Any = None):
        self.config = config
        self.store = Store(config.db_path)
        self.cache = TreeCache(self.store)
        self.evaluators = EvaluatorHolder(config, evaluator)
        self.memory = MemoryAdapter(config.db_path, threshold=config.memory_threshold,
                                    write_turn=self.store.write_turn)
        self.rng = random.Random(config.seed)
        self._rng_lock = threading.Lock()
        # evaluation threads (and the processes they start) yield the CPU to the threads answering tools
        self._pool = ThreadPoolExecutor(max_workers=max(2, config.max_parallel or 4), thread_name_prefix="adx-eval",
                                        initializer=lower_priority)
        self._jobs: dict[str, Future] = {}
        self._jobs_lock = threading.Lock()
        self._expand_lock = threading.Lock()
        self._params_cache: dict[str, tuple[SearchParams, EvalProtocol, str]] = {}
        self._facts_cache: dict[str, TaskFacts] = {}
        self._change_cache: dict[str, str] = {}  # node id -> what it changed from its parent
        self._scrub_extra = scrub_pairs(config)
        self.owner = new_owner()
        self.stopping = False
        self.closed = False
        self.metrics = Metrics()
        self.metrics.watch_state(self.store.nodes_by_status, self.queue_depth, self.memory.rule_counts)
        self.recover()
        self.leases = LeaseKeeper(self.store, self.owner, config.lease_s,
                                  on_settled=lambda _n: self.metrics.leases_expired.inc()).start()

    def queue_depth(self) -> int:
        with self._jobs_lock:
            return len(self._jobs)

    def shutdown(self, grace_s: float | None = None) -> list[str]:
        """Stop taking evaluations, give running ones `grace_s` to finish, mark the rest infra_error, close.

        Returns the node ids marked. Safe to call more than once."""
        if self.closed:
            return []
        self.stopping = True
        grace = self.config.shutdown_grace_s if grace_s is None else grace_s
        with self._jobs_lock:
            jobs = list(self._jobs.values())
        if jobs and grace > 0:
            wait_futures(jobs, timeout=grace)
        self.leases.stop()
        marked = []
        result, feedback = infra_result("ServerShutdown", SHUTDOWN)
        for node_id in self.store.open_evaluations(self.owner):
            if self.store.finish_node(node_id, status="infra_error", result=result, feedback=feedback, speedup=None,
                                      reward=None, owner=self.owner):
                marked.append(node_id)
        if marked:
            log.warning("shutdown: marked %d unfinished evaluation(s) infra_error", len(marked))
        self.close()
        return marked

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.stopping = True
        self.leases.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.evaluators.close()
        self.store.close()

    # -- startup ------------------------------------------------------------------

    def recover(self) -> list[str]:
        """End evaluations a killed server process on this host left behind as infra_error (others by lease)."""
        lost = self.store.interrupted_evaluations()
        result, feedback = infra_result(
            "InterruptedEvaluation", "the server stopped while this kernel was being evaluated; submit it again to "
            "re-run it")
        for node_id in lost:
            self.store.finish_node(node_id, status="infra_error", result=result, feedback=feedback, speedup=None,
                                   reward=None)
        if lost:
            log.warning("marked %d interrupted evaluation(s) as infra_error", len(lost))
        return lost
