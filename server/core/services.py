"""The server's application core: the services behind the tools, over one store and the evaluators.

The evaluators are one per GPU (one CPU pool without a GPU), held by `evaluation.EvaluatorHolder` as
one fleet and started on first use.

Runs in the server process (and in CLI commands that change state). Nothing here speaks MCP: the
services are plain blocking methods (tools call them on worker threads) that raise the domain errors
of `errors` for a caller's mistake; a failing kernel is a result, never an error. Each concern is a
service of its own, built here with what it needs:

* `tasks` (`TreeService`, in `tree_service`): task registration and the read-only views of the tree;
* `search` (`SearchService`, in `search_service`): expansion, submission and evaluation of candidates;
* `skills` (`SkillService`, in `skill_service`): the skill memory as the tree sees it, synthesis briefs, failure rules;
* `memory` (`SkillMemory`, in `skill_memory`): the skill memory's own operations (merges, edits, export, import).
"""

from __future__ import annotations

import logging

from ...common.vocab import Status
from ...evaluator import EvaluatorLike
from .config import ServerConfig
from .evaluation import EvaluatorHolder
from .leases import SHUTDOWN, LeaseKeeper, infra_result, new_owner
from .metrics import Metrics
from .search_service import SearchService
from .skill_memory import SkillMemory
from .skill_service import SkillService
from .tree_service import TreeService
from .tree_store import TreeStore
from .treecache import TreeCache

log = logging.getLogger("adaexplore.server")


class Service:
    """The services of one server process and the resources they share (store, evaluators, leases)."""

    def __init__(self, config: ServerConfig, *, evaluator: EvaluatorLike | None = None):
        self.config = config
        self.store = TreeStore(config.db_path)
        self.cache = TreeCache(self.store)
        self.evaluators = EvaluatorHolder(config, evaluator)
        self.memory = SkillMemory(self.store.db, threshold=config.memory_threshold)
        self.metrics = Metrics()
        self.owner = new_owner()
        self.tasks = TreeService(config, self.store, self.cache, self.evaluators)
        self.search = SearchService(config, self.store, self.tasks, self.evaluators, self.memory, self.metrics,
                                    self.owner)
        self.skills = SkillService(self.store, self.tasks, self.memory)
        self.closed = False
        self.metrics.watch_state(self.store.nodes_by_status, self.search.queue_depth, self.memory.rule_counts)
        self.recover()
        self.leases = LeaseKeeper(self.store, self.owner, config.lease_s,
                                  on_settled=lambda _n: self.metrics.leases_expired.inc()).start()

    @property
    def stopping(self) -> bool:
        """True once shutdown began: no new evaluations are taken."""
        return self.search.stopping

    def stop_accepting(self) -> None:
        """Take no new evaluations from now on (the first step of a shutdown)."""
        self.search.stopping = True

    def queue_depth(self) -> int:
        return self.search.queue_depth()

    def scrub(self, text: str) -> str:
        """`text` without this server's paths (data directory, task roots, Python installation)."""
        return self.tasks.scrub(text)

    def shutdown(self, grace_s: float | None = None) -> list[str]:
        """Stop taking evaluations, give running ones `grace_s` to finish, mark the rest infra_error, close.

        Returns the node ids marked. Safe to call more than once."""
        if self.closed:
            return []
        self.search.drain(self.config.shutdown_grace_s if grace_s is None else grace_s)
        self.leases.stop()
        marked = []
        result, feedback = infra_result("ServerShutdown", SHUTDOWN)
        for node_id in self.store.open_evaluations(self.owner):
            if self.store.finish_node(node_id, status=Status.infra_error, result=result, feedback=feedback,
                                      speedup=None, reward=None, owner=self.owner):
                marked.append(node_id)
        if marked:
            log.warning("shutdown: marked %d unfinished evaluation(s) infra_error", len(marked))
        self.close()
        return marked

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.leases.stop()
        self.search.close()
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
            self.store.finish_node(node_id, status=Status.infra_error, result=result, feedback=feedback, speedup=None,
                                   reward=None)
        if lost:
            log.warning("marked %d interrupted evaluation(s) as infra_error", len(lost))
        return lost
