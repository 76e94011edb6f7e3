"""Tasks and the search tree as the tools read them: registration, listing, nodes, summaries, best candidates.

Runs in the server process. Also the per-task search index (built once per tree version, virtual loss added
per call), which the search service reuses for expansion and evaluation. Raises the core's domain errors.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from pydantic import ValidationError

from ...common.redact import scrub
from ...common.vocab import PENDING, REFERENCE, Action
from ...evaluator import (
    TOLERANCE_PROFILES,
    EvalProtocol,
    Task,
    TaskError,
    check_task_source,
    source_hash,
    task_name_from_path,
)
from ...search import NodeView, PendingView, SearchParams, TreeIndex, best_nodes, budget_left
from . import texts
from .config import ServerConfig
from .errors import InvalidRequest, NotFound, Unavailable
from .evaluation import EvaluatorHolder
from .inputs import check_parsable, missing_task_file, resolve_task_path, scrub_pairs
from .taskfacts import input_specs
from .tool_models import (
    MAX_SOURCE_CHARS,
    BestCandidatesResult,
    Candidate,
    Flag,
    ListTasksResult,
    NodeBrief,
    NodeInfo,
    ProtocolOverrides,
    RegisterTaskResult,
    SearchOverrides,
    TaskFacts,
    TaskInfo,
    TensorSpec,
    TreeSummary,
)
from .tree_store import NodeRow, TaskRow, TreeStore, root_id
from .treecache import TreeCache

log = logging.getLogger("adaexplore.server")

DEFAULT_STEP_BUDGET = 100
ROOT_STATUS = REFERENCE
DEGENERATE_FLAGS = frozenset({"nan_in_reference", "all_zeros", "constant_output", "equals_input", "zeros_pass",
                              "random_in_forward"})
"""Validation flags that make a synthesized task useless: a trivial kernel would pass it."""


def _status(s: str | None) -> str:
    return PENDING if s is None else s


def _runtime_ms(result: dict[str, Any] | None) -> float | None:
    timing = (result or {}).get("timing") or {}
    return timing.get("median_ms")  # TimingStats.runtime_ms: what speedups are computed from


class TreeService:
    """Task registration and read-only views of the tree."""

    def __init__(self, config: ServerConfig, store: TreeStore, cache: TreeCache, evaluators: EvaluatorHolder):
        self.config = config
        self.store = store
        self.cache = cache
        self.evaluators = evaluators
        self._params_cache: dict[str, tuple[SearchParams, EvalProtocol, str]] = {}
        self._facts_cache: dict[str, TaskFacts] = {}
        self._scrub_extra = scrub_pairs(config)

    # -- tasks --------------------------------------------------------------------

    def task(self, task_id: str) -> TaskRow:
        """The task `task_id`, or NotFound with how to find one."""
        task = self.store.get_task(task_id)
        if task is None:
            raise NotFound(f"unknown task_id {task_id!r}; call list_tasks to see registered tasks "
                            "or register_task to add one")
        return task

    def params(self, task_id: str) -> tuple[SearchParams, EvalProtocol, str]:
        cached = self._params_cache.get(task_id)
        if cached is None:
            task = self.task(task_id)
            cached = (SearchParams(**(task.params or {})), EvalProtocol(**(task.protocol or {})), task.name)
            self._params_cache[task_id] = cached
        return cached

    def task_facts(self, task_id: str, with_code: bool) -> TaskFacts:
        """Inputs (read from the source), outputs (from validation), tolerance and device of a task."""
        facts = self._facts_cache.get(task_id)
        if facts is None:
            task = self.task(task_id)
            _, protocol, _ = self.params(task_id)
            v = task.validation or {}
            shapes, dtypes = v.get("output_shapes", []), v.get("output_dtypes", [])
            tol = protocol.tolerance
            facts = TaskFacts(
                inputs=[TensorSpec(**spec) for spec in input_specs(task.source)],
                outputs=[TensorSpec(shape=sh, dtype=(dtypes[k] if k < len(dtypes) else "unknown").removeprefix(
                    "torch.")) for k, sh in enumerate(shapes)],
                tolerance=(f"every output element: |out - ref| <= atol + rtol * |ref| with atol={tol.atol:g}, "
                           f"rtol={tol.rtol:g} ('{tol.name}' profile), on {protocol.correctness_trials} random "
                           "input sets; NaN never passes"),
                device=v.get("device", "cpu"), parameters=texts.WEIGHTS.format(seed=protocol.seed),
                reference_code=task.source)
            self._facts_cache[task_id] = facts
        return facts if with_code else facts.model_copy(update={"reference_code": None})

    def _read_task_path(self, path: str) -> tuple[str, str]:
        if not self.config.task_roots:
            raise InvalidRequest("reading task files is disabled on this server (no --task-root); pass the source text")
        resolved = resolve_task_path(path, self.config.task_roots)
        if resolved.stat().st_size > MAX_SOURCE_CHARS:
            raise InvalidRequest(f"task file {path!r} is larger than {MAX_SOURCE_CHARS} bytes; register a smaller "
                                 "module")
        try:
            return resolved.read_text(), task_name_from_path(resolved)
        except (OSError, UnicodeDecodeError):
            raise missing_task_file(path) from None

    def scrub(self, text: str) -> str:
        """`text` without this server's paths (data directory, task roots, Python installation)."""
        return scrub(text, self._scrub_extra)

    def register_task(self, *, source: str | None, path: str | None, name: str | None,
                      search: SearchOverrides | None, protocol: ProtocolOverrides | None,
                      caller: str, synthetic: bool = False) -> RegisterTaskResult:
        if (source is None) == (path is None):
            raise InvalidRequest("give exactly one of 'source' (the reference module text) or 'path' (a file inside "
                            "a task root)")
        default_name = "task"
        if path is not None:
            source, default_name = self._read_task_path(path)
        assert source is not None
        check_parsable(source, "the task source")
        try:
            check_task_source(source)
        except TaskError as exc:
            raise InvalidRequest(self.scrub(f"bad task: {exc}")) from None
        params = self._search_params(search)
        proto = self._protocol(protocol)
        task = Task(name=(name or default_name)[:200], source=source, protocol=proto)
        task_id = task.task_id
        existing = self.store.get_task(task_id)
        if existing is None:
            evaluator = self.evaluators.get()
            try:
                validation = evaluator.validate_task(task)
            except Exception as exc:  # our fault, not the task's
                log.exception("validation crashed")
                raise Unavailable(f"the server could not validate the task ({type(exc).__name__}); "
                                  "retry later") from exc
            if not validation.ok:
                err = validation.error
                if err is not None and err.error_class == "InfraError":  # ours: the task is not to blame
                    raise Unavailable(self.scrub(f"the server could not validate the task: {err.message}; "
                                                 "retry later"))
                if err is not None and err.error_class == "TaskTooLarge":
                    raise InvalidRequest(self.scrub(f"task too large for this server: {err.message}. Make its "
                                                    "inputs or outputs smaller, or register it on a larger device"))
                detail = f"{err.error_class}: {err.message}" + (f" (line {err.line})" if err.line else "") if err else ""
                raise InvalidRequest(self.scrub(f"bad task: the reference does not run: {detail}. Fix the module "
                                                "and register again"))
            degenerate = [f for f in validation.flags if f.code in DEGENERATE_FLAGS]
            if synthetic and degenerate:
                why = "; ".join(f"{f.code}: {f.message}" for f in degenerate)
                raise InvalidRequest(f"synthesized task rejected, it is degenerate ({why}). Change the computation so "
                                "the output depends on every input and is not trivially matched, then register again")
            vdump = validation.model_dump(mode="json", exclude_none=True)
            flags: list[str] = [f.code for f in validation.flags]
            timing = validation.reference_timing
            self.store.insert_task(
                task_id=task_id, name=task.name, source=source, source_hash=source_hash(source), validation=vdump,
                flags=flags, params=params.model_dump(exclude_defaults=True) | {"step_budget": params.step_budget},
                protocol=proto.model_dump(mode="json"), created_by=caller, root_status=ROOT_STATUS,
                root_speedup=1.0 if timing else None, root_reward=None,
                root_result={"reference_timing": timing.model_dump(mode="json")} if timing else None,
                synthetic=synthetic)
            existing = self.store.get_task(task_id)
            created = True
        else:
            created = False
        assert existing is not None
        v = existing.validation or {}
        timing = v.get("reference_timing")
        device = v.get("device", "cpu")
        stored = SearchParams(**(existing.params or {}))
        return RegisterTaskResult(
            task_id=task_id, name=existing.name, existing=not created, root_node_id=root_id(task_id),
            synthetic=existing.synthetic,
            flags=[Flag(code=f["code"], message=f["message"]) for f in v.get("flags", [])],
            output_shapes=v.get("output_shapes", []), facts=self.task_facts(task_id, with_code=False),
            baseline_ms=timing["median_ms"] if timing else None,
            baseline_note=None if timing else texts.no_timing_note(device),
            device=device, max_steps=stored.step_budget or 0)

    def _search_params(self, o: SearchOverrides | None) -> SearchParams:
        values: dict[str, Any] = {"step_budget": DEFAULT_STEP_BUDGET}
        if o is not None:
            for k, v in o.model_dump().items():
                if v is not None and k != "max_steps":
                    values[k] = v
            if o.max_steps is not None:
                values["step_budget"] = o.max_steps
        try:
            return SearchParams(**values)
        except ValidationError as exc:
            raise InvalidRequest(f"bad search settings: {exc.errors()[0]['msg']} (reward is 'paper' or "
                            "'log_speedup')") from None

    def _protocol(self, o: ProtocolOverrides | None) -> EvalProtocol:
        if o is None:
            return EvalProtocol()
        values: dict[str, Any] = {k: v for k, v in o.model_dump().items() if v is not None and k != "tolerance"}
        if o.tolerance:
            values["tolerance"] = TOLERANCE_PROFILES[o.tolerance]
        return EvalProtocol(**values)

    def list_tasks(self) -> ListTasksResult:
        return ListTasksResult(tasks=[
            TaskInfo(task_id=t.id, name=t.name, nodes=t.nodes, best_speedup=t.best_speedup,
                     flags=t.flags, created_by=t.created_by, synthetic=t.synthetic)
            for t in self.store.list_tasks()])

    # -- the tree -----------------------------------------------------------------

    def index(self, task_id: str, with_pending: bool = True) -> tuple[TreeIndex, Any]:
        """The task's search index: built once per tree version, then virtual loss added per call."""
        try:
            self.cache.rows(task_id)
        except KeyError:
            self.task(task_id)
            raise
        params, _, _ = self.params(task_id)
        entry = self.cache.entry(task_id)

        def build(rows: list[NodeRow]) -> TreeIndex:
            nodes = [NodeView(r.id, r.parent_id, r.action, None if r.action == Action.root else r.status, r.speedup,
                              r.seq) for r in rows]
            return TreeIndex.build(nodes, [], params, time.time())

        base = entry.memoized("index", build)
        if not with_pending:
            return base, entry
        now = time.time()
        pending = [PendingView(i, n, c, a) for i, n, c, a in self.store.open_expansions(task_id, now)]
        return base.with_pending(pending, now), entry

    def brief(self, entry: Any, node_id: str) -> NodeBrief:
        r = entry.rows[node_id]
        return NodeBrief(node_id=r.id, parent_id=r.parent_id, action=r.action, status=_status(r.status),
                         speedup=r.speedup, reward=r.reward)

    def best(self, index: TreeIndex, entry: Any) -> NodeBrief | None:
        """The task's best correct node, if any."""
        ids = entry.memoized(("best", 1), lambda _: best_nodes(index, 1))
        return self.brief(entry, ids[0]) if ids else None

    def get_node(self, node_id: str, include_code: bool) -> NodeInfo:
        node = self.store.get_node(node_id, with_source=include_code)
        if node is None:
            raise NotFound(f"unknown node_id {node_id!r}; node ids look like '<task_id>-<n>' "
                           "(see tree_summary or best_candidates)")
        _, _, entry = self.cache.rows(node.task_id)
        return NodeInfo(
            node_id=node.id, task_id=node.task_id, parent_id=node.parent_id, action=node.action,
            status=_status(node.status), speedup=node.speedup, reward=node.reward, seq=node.seq,
            depth=entry.depth.get(node_id, 0), children=entry.children.get(node_id, 0),
            feedback=node.feedback, runtime_ms=_runtime_ms(node.result), created_by=node.created_by,
            code=node.source if include_code else None)

    def tree_summary(self, task_id: str, top: int) -> TreeSummary:
        index, entry = self.index(task_id)
        params, _, name = self.params(task_id)
        def count(rows: list[NodeRow]) -> dict[str, int]:
            out: dict[str, int] = {}
            for r in rows:
                if r.action != Action.root:
                    out[_status(r.status)] = out.get(_status(r.status), 0) + 1
            return out

        by_status = entry.memoized("by_status", count)
        left = budget_left(index, params)
        return TreeSummary(
            task_id=task_id, name=name, nodes=len(entry.ordered) - 1, by_status=by_status,
            open_expansions=index.live_pending, best=self.best(index, entry),
            max_depth=entry.memoized("max_depth", lambda _: max(entry.depth.values(), default=0)),
            steps_used=index.n_visible + index.live_pending, budget_left=left if left is not None else -1,
            tree=entry.memoized(("tree", top), lambda _: texts.text_tree(entry, top)))

    def best_candidates(self, task_id: str, k: int, include_code: bool) -> BestCandidatesResult:
        index, entry = self.index(task_id, with_pending=False)
        ids = entry.memoized(("best", k), lambda _: best_nodes(index, k))
        codes = self.store.node_sources(ids) if include_code else {}
        shares = self.store.triton_shares(ids)
        out = []
        for i in ids:
            b = self.brief(entry, i)
            out.append(Candidate(**b.model_dump(), created_by="", triton_share=shares.get(i), code=codes.get(i)))
        if ids:
            who = self.store.node_details(ids)
            out = [c.model_copy(update={"created_by": who[c.node_id].created_by}) for c in out]
        untimed = [c for c in out if c.speedup is None]
        device = (self.task(task_id).validation or {}).get("device", "cpu")
        note = texts.tie_note(len(untimed), untimed[0].reward, device) if len(untimed) > 1 else None
        return BestCandidatesResult(task_id=task_id, candidates=out, note=note)
