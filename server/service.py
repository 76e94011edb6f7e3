"""The operations behind the tools: tasks, the search tree, evaluations and the skill memory.

Plain blocking methods (tools call them on worker threads). Caller mistakes raise ToolError
with a message that says how to fix the call; a failing kernel is a result, never an error.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from ..evaluator.task import Task, TaskError, check_task_source, source_hash, task_name_from_path
from ..evaluator.types import TOLERANCE_PROFILES, ErrorInfo, EvalResult, Protocol, Status
from ..search import (
    NodeView,
    PendingView,
    SearchParams,
    TreeIndex,
    best_nodes,
    budget_left,
    choose_action,
    large_step_context,
    reward_for,
    select,
    small_step_context,
)
from . import texts
from .config import ServerConfig
from .edits import EditError, apply_edits
from .evaluation import EvaluatorHolder
from .memory import MemoryAdapter
from .models import (
    MAX_SOURCE_CHARS,
    BestCandidatesResult,
    Candidate,
    ContextNode,
    Edit,
    EvaluateResult,
    ExpandResult,
    Flag,
    ListTasksResult,
    NodeBrief,
    NodeInfo,
    OperatorInfo,
    ProtocolOverrides,
    RecordFailureResult,
    RegisterTaskResult,
    SearchOverrides,
    SkillMemoryResult,
    SynthesisResult,
    TaskInfo,
    TreeSummary,
)
from .store import Store, root_id
from .treecache import TreeCache

log = logging.getLogger("adaexplore.server")

DEFAULT_STEP_BUDGET = 100
ROOT_STATUS = "reference"
DEGENERATE_FLAGS = frozenset({"nan_in_reference", "all_zeros", "constant_output", "equals_input", "zeros_pass",
                              "random_in_forward"})
"""Validation flags that make a synthesized task useless: a trivial kernel would pass it."""
MAX_SEED_TASKS = 3


def _status(s: str | None) -> str:
    return "pending" if s is None else s


def _runtime_ms(result: dict[str, Any] | None) -> float | None:
    timing = (result or {}).get("timing") or {}
    return timing.get("mean_ms")


class Service:
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

    # -- tasks --------------------------------------------------------------------

    def _task(self, task_id: str) -> dict[str, Any]:
        task = self.store.get_task(task_id)
        if task is None:
            raise ToolError(f"unknown task_id {task_id!r}; call list_tasks to see registered tasks "
                            "or register_task to add one")
        return task

    def _params(self, task_id: str) -> tuple[SearchParams, Protocol, str]:
        cached = self._params_cache.get(task_id)
        if cached is None:
            task = self._task(task_id)
            cached = (SearchParams(**(task["params"] or {})), Protocol(**(task["protocol"] or {})), task["name"])
            self._params_cache[task_id] = cached
        return cached

    def _read_task_path(self, path: str) -> tuple[str, str]:
        if not self.config.task_roots:
            raise ToolError("reading task files is disabled on this server (no --task-root); pass the source text")
        p = Path(path).expanduser()
        try:
            resolved = p.resolve(strict=True)
        except (OSError, RuntimeError):
            raise ToolError(f"task file {path!r} not found") from None
        roots = [Path(r).resolve() for r in self.config.task_roots]
        if not any(resolved.is_relative_to(r) for r in roots):
            raise ToolError(f"{path!r} is outside the task roots ({', '.join(map(str, roots))}); "
                            "pass a path inside one of them, or the source text")
        if not resolved.is_file() or resolved.stat().st_size > MAX_SOURCE_CHARS:
            raise ToolError(f"{path!r} is not a regular file of at most {MAX_SOURCE_CHARS} bytes")
        try:
            return resolved.read_text(), task_name_from_path(resolved)
        except (OSError, UnicodeDecodeError) as exc:
            raise ToolError(f"cannot read {path!r}: {exc}") from None

    def register_task(self, *, source: str | None, path: str | None, name: str | None,
                      search: SearchOverrides | None, protocol: ProtocolOverrides | None,
                      caller: str, synthetic: bool = False) -> RegisterTaskResult:
        if (source is None) == (path is None):
            raise ToolError("give exactly one of 'source' (the reference module text) or 'path' (a file inside "
                            "a task root)")
        default_name = "task"
        if path is not None:
            source, default_name = self._read_task_path(path)
        assert source is not None
        try:
            check_task_source(source)
        except TaskError as exc:
            raise ToolError(f"bad task: {exc}") from None
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
                raise ToolError(f"the server could not validate the task ({type(exc).__name__}); retry later") from exc
            if not validation.ok:
                err = validation.error
                detail = f"{err.error_class}: {err.message}" + (f" (line {err.line})" if err.line else "") if err else ""
                raise ToolError(f"bad task: the reference does not run: {detail}. Fix the module and register again")
            degenerate = [f for f in validation.flags if f.code in DEGENERATE_FLAGS]
            if synthetic and degenerate:
                why = "; ".join(f"{f.code}: {f.message}" for f in degenerate)
                raise ToolError(f"synthesized task rejected, it is degenerate ({why}). Change the computation so "
                                "the output depends on every input and is not trivially matched, then register again")
            vdump = validation.model_dump(mode="json", exclude_none=True)
            flags = [f.code for f in validation.flags]
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
        v = existing["validation"] or {}
        timing = v.get("reference_timing")
        device = v.get("device", "cpu")
        stored = SearchParams(**(existing["params"] or {}))
        return RegisterTaskResult(
            task_id=task_id, name=existing["name"], existing=not created, root_node_id=root_id(task_id),
            synthetic=bool(existing.get("synthetic")),
            flags=[Flag(code=f["code"], message=f["message"]) for f in v.get("flags", [])],
            output_shapes=v.get("output_shapes", []),
            baseline_ms=timing["mean_ms"] if timing else None,
            baseline_note=None if timing else texts.no_timing_note(device),
            device=device, max_steps=stored.step_budget or 0)

    def _search_params(self, o: SearchOverrides | None) -> SearchParams:
        values: dict[str, Any] = {"step_budget": DEFAULT_STEP_BUDGET}
        if o is not None:
            for k in ("c_explore", "c_expand", "p_large", "expansion_ttl_s", "reward"):
                if getattr(o, k) is not None:
                    values[k] = getattr(o, k)
            if o.max_steps is not None:
                values["step_budget"] = o.max_steps
        try:
            return SearchParams(**values)
        except ValidationError as exc:
            raise ToolError(f"bad search settings: {exc.errors()[0]['msg']} (reward is 'paper' or "
                            "'log_speedup')") from None

    def _protocol(self, o: ProtocolOverrides | None) -> Protocol:
        if o is None:
            return Protocol()
        values: dict[str, Any] = {k: v for k, v in o.model_dump().items() if v is not None and k != "tolerance"}
        if o.tolerance:
            values["tolerance"] = TOLERANCE_PROFILES[o.tolerance]
        return Protocol(**values)

    def list_tasks(self) -> ListTasksResult:
        return ListTasksResult(tasks=[
            TaskInfo(task_id=t["id"], name=t["name"], nodes=t["nodes"], best_speedup=t["best_speedup"],
                     flags=t["flags"], created_by=t["created_by"], synthetic=t["synthetic"])
            for t in self.store.list_tasks()])

    # -- the tree -----------------------------------------------------------------

    def _index(self, task_id: str, with_pending: bool = True) -> tuple[TreeIndex, Any]:
        """The task's search index: built once per tree version, then virtual loss added per call."""
        try:
            self.cache.rows(task_id)
        except KeyError:
            self._task(task_id)
            raise
        params, _, _ = self._params(task_id)
        entry = self.cache.entry(task_id)

        def build(rows: list) -> TreeIndex:
            nodes = [NodeView(r.id, r.parent_id, r.action, None if r.action == "root" else r.status, r.speedup,
                              r.seq) for r in rows]
            return TreeIndex.build(nodes, [], params, time.time())

        base = entry.memoized("index", build)
        if not with_pending:
            return base, entry
        now = time.time()
        pending = [PendingView(i, n, c) for i, n, c in self.store.open_expansions(task_id, now)]
        return base.with_pending(pending, now), entry

    def _brief(self, entry: Any, node_id: str) -> NodeBrief:
        r = entry.rows[node_id]
        return NodeBrief(node_id=r.id, parent_id=r.parent_id, action=r.action, status=_status(r.status),
                         speedup=r.speedup, reward=r.reward)

    def _best(self, index: TreeIndex, entry: Any) -> NodeBrief | None:
        ids = entry.memoized(("best", 1), lambda _: best_nodes(index, 1))
        return self._brief(entry, ids[0]) if ids else None

    def get_node(self, node_id: str, include_code: bool) -> NodeInfo:
        node = self.store.get_node(node_id, with_source=include_code)
        if node is None:
            raise ToolError(f"unknown node_id {node_id!r}; node ids look like '<task_id>-<n>' "
                            "(see tree_summary or best_candidates)")
        _, _, entry = self.cache.rows(node["task_id"])
        return NodeInfo(
            node_id=node["id"], task_id=node["task_id"], parent_id=node["parent_id"], action=node["action"],
            status=_status(node["status"]), speedup=node["speedup"], reward=node["reward"], seq=node["seq"],
            depth=entry.depth.get(node_id, 0), children=entry.children.get(node_id, 0),
            feedback=node["feedback"], runtime_ms=_runtime_ms(node["result"]), created_by=node["created_by"],
            code=node.get("source") if include_code else None)

    def tree_summary(self, task_id: str, top: int) -> TreeSummary:
        index, entry = self._index(task_id)
        params, _, name = self._params(task_id)
        def count(rows: list) -> dict[str, int]:
            out: dict[str, int] = {}
            for r in rows:
                if r.action != "root":
                    out[_status(r.status)] = out.get(_status(r.status), 0) + 1
            return out

        by_status = entry.memoized("by_status", count)
        left = budget_left(index, params)
        return TreeSummary(
            task_id=task_id, name=name, nodes=len(entry.ordered) - 1, by_status=by_status,
            open_expansions=index.live_pending, best=self._best(index, entry),
            max_depth=entry.memoized("max_depth", lambda _: max(entry.depth.values(), default=0)),
            steps_used=index.n_visible + index.live_pending, budget_left=left if left is not None else -1,
            tree=entry.memoized(("tree", top), lambda _: texts.text_tree(entry, top)))

    def expand(self, task_id: str, caller: str) -> ExpandResult:
        params, _, _ = self._params(task_id)
        with self._expand_lock:  # one selection at a time per process; the DB orders processes
            index, entry = self._index(task_id)
            left = budget_left(index, params)
            if left is not None and left <= 0:
                return ExpandResult(task_id=task_id, budget_exhausted=True, budget_left=0,
                                    instructions=texts.BUDGET_EXHAUSTED)
            with self._rng_lock:
                sel = select(index, params, self.rng)
                action = choose_action(index, sel.node_id, params, self.rng)
                ctx_ids = (small_step_context(index, sel.node_id, params) if action == "small"
                           else large_step_context(index, sel.node_id, params, self.rng))
            expansion_id = "x" + uuid.uuid4().hex[:12]
            expires = self.store.create_expansion(expansion_id=expansion_id, task_id=task_id, node_id=sel.node_id,
                                                  action=action, created_by=caller, ttl_s=params.expansion_ttl_s)
        parent = self.store.get_node(sel.node_id)
        assert parent is not None
        parent_ctx = ContextNode(node_id=parent["id"], action=parent["action"], status=_status(parent["status"]),
                                 speedup=parent["speedup"], feedback=parent["feedback"], code=parent["source"])
        ctx_ids = [i for i in ctx_ids if i != sel.node_id] if action == "large" else ctx_ids
        details = self.store.node_details(ctx_ids)
        codes = self.store.node_sources(ctx_ids) if action == "large" else {}
        ctx_nodes = [ContextNode(node_id=i, action=details[i]["action"], status=_status(details[i]["status"]),
                                 speedup=details[i]["speedup"], feedback=details[i]["feedback"], code=codes.get(i))
                     for i in ctx_ids if i in details]
        task_source = self.store.get_task(task_id)["source"]  # type: ignore[index]
        return ExpandResult(
            task_id=task_id, expansion_id=expansion_id, expires_at=expires, action=action,
            instructions=texts.instructions(action, parent["action"] == "root"), parent=parent_ctx,
            history=ctx_nodes if action == "small" else [], pool=ctx_nodes if action == "large" else [],
            memory=self.memory.render(task_source, 1500),
            hardware=self.evaluators.hardware(), budget_left=max(0, left - 1) if left is not None else -1)

    def best_candidates(self, task_id: str, k: int, include_code: bool) -> BestCandidatesResult:
        index, entry = self._index(task_id, with_pending=False)
        ids = entry.memoized(("best", k), lambda _: best_nodes(index, k))
        codes = self.store.node_sources(ids) if include_code else {}
        out = []
        for i in ids:
            b = self._brief(entry, i)
            out.append(Candidate(**b.model_dump(), created_by="", code=codes.get(i)))
        if ids:
            who = self.store.node_details(ids)
            out = [c.model_copy(update={"created_by": who[c.node_id]["created_by"]}) for c in out]
        return BestCandidatesResult(task_id=task_id, candidates=out)

    # -- evaluation ---------------------------------------------------------------

    def submit(self, *, task_id: str, source: str | None, edits: list[Edit] | None, parent_node_id: str | None,
               expansion_id: str | None, caller: str) -> tuple[str, Future | None, bool]:
        """Attach a candidate to the tree and start its evaluation. Returns (node_id, job, duplicate)."""
        self._task(task_id)
        params, protocol, name = self._params(task_id)
        parent_id, action = root_id(task_id), "large"
        if expansion_id is not None:
            exp = self.store.get_expansion(expansion_id)
            if exp is None or exp["task_id"] != task_id:
                raise ToolError(f"unknown expansion_id {expansion_id!r} for this task; call expand_node to get one, "
                                "or omit it")
            if exp["consumed"]:
                raise ToolError(f"expansion {expansion_id} was already used (node {exp['result_node_id']}); call "
                                "expand_node again, or pass parent_node_id instead")
            if parent_node_id is not None and parent_node_id != exp["node_id"]:
                raise ToolError(f"expansion {expansion_id} is for node {exp['node_id']}, not {parent_node_id}; "
                                "drop parent_node_id or the expansion_id")
            parent_id, action = exp["node_id"], exp["action"]
        elif parent_node_id is not None:
            parent_id, action = parent_node_id, "small"
        parent = self.store.get_node(parent_id, with_source=edits is not None)
        if parent is None or parent["task_id"] != task_id:
            raise ToolError(f"unknown parent_node_id {parent_id!r} for task {task_id}")
        if parent["status"] == "infra_error":
            raise ToolError(f"node {parent_id} failed for infrastructure reasons and is not in the search; "
                            "resubmit its code, or pick another parent")
        if (source is None) == (edits is None):
            raise ToolError("give exactly one of 'source' (the full candidate) or 'edits' (exact replacements "
                            "against the parent node's code)")
        if edits is not None:
            if not edits:
                raise ToolError("'edits' is empty; give at least one {old, new} replacement")
            if parent_node_id is None and expansion_id is None:
                raise ToolError("edits need a parent: pass parent_node_id or expansion_id")
            try:
                source = apply_edits(parent["source"], edits)
            except EditError as exc:
                raise ToolError(str(exc)) from None
            if len(source) > MAX_SOURCE_CHARS:
                raise ToolError(f"the edited source exceeds {MAX_SOURCE_CHARS} characters")
        assert source is not None
        if not source.strip():
            raise ToolError("the candidate source is empty; send a module that defines class ModelNew")
        h = source_hash(source)
        node, created = self.store.create_node(task_id=task_id, parent_id=parent_id, action=action, source=source,
                                               source_hash=h, created_by=caller, expansion_id=expansion_id)
        node_id = node["id"]
        if not created:
            with self._jobs_lock:
                return node_id, self._jobs.get(node_id), True
        task = Task(name=name, source=self.store.get_task(task_id)["source"], protocol=protocol)  # type: ignore[index]
        job = self._pool.submit(self._evaluate, task_id, node_id, task, source, protocol, params, caller)
        with self._jobs_lock:
            self._jobs[node_id] = job
        job.add_done_callback(lambda _f, n=node_id: self._forget(n))
        return node_id, job, False

    def _forget(self, node_id: str) -> None:
        with self._jobs_lock:
            self._jobs.pop(node_id, None)

    def _evaluate(self, task_id: str, node_id: str, task: Task, source: str, protocol: Protocol,
                  params: SearchParams, caller: str) -> None:
        try:
            result = self.evaluators.get().evaluate(task, source, protocol)
        except Exception as exc:  # the evaluator promises not to raise; if it does, it is our fault
            log.exception("evaluator crashed on %s", node_id)
            result = EvalResult(status=Status.infra_error, error=ErrorInfo(
                error_class="InfraError", message=f"the evaluator failed ({type(exc).__name__}); resubmit to retry"))
        status = result.status.value
        infra = result.status is Status.infra_error
        reward = None if infra else reward_for(params, status, result.speedup)
        self.store.finish_node(node_id, status=status, result=result.model_dump(mode="json", exclude_none=True),
                               feedback=result.feedback(), speedup=result.speedup, reward=reward)
        if infra:
            return
        try:
            if result.ok:
                self.memory.note_correct(task_id, node_id, source)
            else:
                self.memory.experience(task_id, node_id, result, caller)
        except Exception:  # memory is advisory; never lose a result over it
            log.exception("skill memory update failed for %s", node_id)

    def node_result(self, node_id: str, duplicate: bool = False) -> EvaluateResult:
        node = self.store.get_node(node_id, with_source=False)
        assert node is not None
        task_id = node["task_id"]
        params, _, _ = self._params(task_id)
        index, entry = self._index(task_id)
        left = budget_left(index, params)
        return EvaluateResult(
            task_id=task_id, node_id=node_id, parent_id=node["parent_id"], status=_status(node["status"]),
            duplicate=duplicate, feedback=node["feedback"] if node["status"] else texts.PENDING,
            speedup=node["speedup"], reward=node["reward"], runtime_ms=_runtime_ms(node["result"]),
            best=self._best(index, entry), budget_left=left if left is not None else -1)

    # -- memory -------------------------------------------------------------------

    def skill_memory(self, task_id: str | None, token_budget: int, include_candidates: bool,
                     include_signatures: bool = False) -> SkillMemoryResult:
        source = self._task(task_id)["source"] if task_id is not None else None
        return self.memory.view(source, token_budget, include_candidates, include_signatures)

    def synthesize(self, n_seeds: int, n_ops: int, seed: int | None) -> SynthesisResult:
        """A brief for writing one new task: seed tasks from the store and torch.nn operators to work in."""
        from ..skills.synthesis import synthesis_brief

        rng = random.Random(seed) if seed is not None else random.Random()
        tasks = self.store.list_tasks()
        picked = rng.sample(tasks, k=min(n_seeds, len(tasks)))
        seeds = []
        for t in picked:
            row = self.store.get_task(t["id"])
            if row is not None:
                seeds.append((t["id"], row["name"], row["source"]))
        brief = synthesis_brief([(name, src) for _, name, src in seeds], rng=rng, n_ops=n_ops)
        seed_text = "\n\n".join(f"# seed task {name} ({tid}): read it with the resource "
                                  f"adaexplore://tasks/{tid}/reference" for tid, name, _ in seeds)
        instructions = brief.instructions.replace(
            "Submit it to the server for registration;",
            "Register it with register_task(source=..., name=..., synthetic=true);")
        if seed_text:
            instructions += "\n\n" + seed_text
        return SynthesisResult(
            seed_tasks=brief.seed_tasks, seed_task_ids=[tid for tid, _, _ in seeds],
            operators=[OperatorInfo(name=o.name, signature=o.signature, summary=o.summary) for o in brief.operators],
            instructions=instructions, format_example=brief.format_example)

    def record_failure(self, *, rule: str, node_id: str | None, task_id: str | None, error_excerpt: str | None,
                       caller: str) -> RecordFailureResult:
        if not rule.strip():
            raise ToolError("'rule' is empty; state the validity rule in one sentence (do X, not Y)")
        if node_id is not None:
            node = self.store.get_node(node_id, with_source=False)
            if node is None:
                raise ToolError(f"unknown node_id {node_id!r}; omit it or pass a node of the failure")
            if task_id is not None and task_id != node["task_id"]:
                raise ToolError(f"node {node_id} belongs to task {node['task_id']}, not {task_id}")
            task_id = node["task_id"]
            if error_excerpt is None and node["feedback"]:
                error_excerpt = node["feedback"][:500]
        elif task_id is not None:
            self._task(task_id)
        return self.memory.record_rule(rule.strip(), caller, task_id, node_id, error_excerpt)
