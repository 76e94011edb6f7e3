"""The operations behind the tools: tasks, the search tree, evaluations and the skill memory.

Plain blocking methods (tools call them on worker threads). Caller mistakes raise ToolError
with a message that says how to fix the call; a failing kernel is a result, never an error.

The logic is split by concern: service_tree (tasks and reading the tree), service_search
(expansion, submission, evaluation) and service_memory (skill memory, synthesis, failure rules).
"""

from __future__ import annotations

import logging
import random
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..evaluator.types import ErrorInfo, EvalResult, Protocol, Status
from ..search import SearchParams
from .config import ServerConfig
from .evaluation import EvaluatorHolder
from .memory import MemoryAdapter
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
        self.memory = MemoryAdapter(config.db_path, threshold=config.memory_threshold)
        self.rng = random.Random(config.seed)
        self._rng_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max(2, config.max_parallel or 4), thread_name_prefix="adx-eval")
        self._jobs: dict[str, Future] = {}
        self._jobs_lock = threading.Lock()
        self._expand_lock = threading.Lock()
        self._params_cache: dict[str, tuple[SearchParams, Protocol, str]] = {}
        self.recover()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.evaluators.close()
        self.store.close()

    # -- startup ------------------------------------------------------------------

    def recover(self) -> list[str]:
        """End evaluations a killed server process left behind as infra_error."""
        lost = self.store.interrupted_evaluations()
        for node_id in lost:
            res = EvalResult(status=Status.infra_error, error=ErrorInfo(
                error_class="InterruptedEvaluation",
                message="the server stopped while this kernel was being evaluated; submit it again to re-run it"))
            self.store.finish_node(node_id, status="infra_error", result=res.model_dump(mode="json", exclude_none=True),
                                   feedback=res.feedback(), speedup=None, reward=None)
        if lost:
            log.warning("marked %d interrupted evaluation(s) as infra_error", len(lost))
        return lost
