"""Growing the tree: expansions, candidate submission (whole source or edits) and background evaluation.

Runs in the server process. Evaluations run on a thread pool of this service; the jobs map tracks
those in flight so a duplicate submission can wait on the same job. Raises the core's domain errors.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures

from ...common.vocab import Action, Status
from ...evaluator import ErrorInfo, EvalProtocol, EvalResult, Task, nan_hint, source_hash, static_verdict
from ...search import (
    SearchParams,
    TreeIndex,
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
from .errors import InvalidRequest, NotFound, Unavailable
from .evaluation import EvaluatorHolder, lower_priority
from .inputs import check_parsable
from .metrics import Metrics
from .skill_memory import SkillMemory
from .texts import change_summary, first_finding, iso_utc
from .tool_models import (
    MAX_SOURCE_CHARS,
    ContextNode,
    Edit,
    EvaluateResult,
    ExpandResult,
    KernelRow,
    ProfileResult,
    Sibling,
    TritonKernelRow,
)
from .tree_service import TreeService, _runtime_ms, _status
from .tree_store import TreeStore, root_id

log = logging.getLogger("adaexplore.server")

MAX_SIBLINGS = 8
"""Siblings shown to an expansion (the newest ones), to keep the context small."""


class SearchService:
    """Expansion, submission and evaluation of candidates."""

    def __init__(self, config: ServerConfig, store: TreeStore, tree: TreeService, evaluators: EvaluatorHolder,
                 memory: SkillMemory, metrics: Metrics, owner: str):
        self.config = config
        self.store = store
        self.tree = tree
        self.evaluators = evaluators
        self.memory = memory
        self.metrics = metrics
        self.owner = owner
        self.rng = random.Random(config.seed)
        self._rng_lock = threading.Lock()
        # evaluation threads (and the processes they start) yield the CPU to the threads answering tools
        self._pool = ThreadPoolExecutor(max_workers=max(2, config.max_parallel or 4), thread_name_prefix="adx-eval",
                                        initializer=lower_priority)
        # Verdicts the static checks give alone (a syntax error, no Triton at all) are recorded here, so they
        # never wait behind other candidates' runs or their task's reference.
        self._settled = ThreadPoolExecutor(max_workers=2, thread_name_prefix="adx-static")
        self._jobs: dict[str, Future[None]] = {}
        self._jobs_lock = threading.Lock()
        self._expand_lock = threading.Lock()
        self._change_cache: dict[str, str] = {}  # node id -> what it changed from its parent
        self.stopping = False

    def queue_depth(self) -> int:
        """Evaluations submitted and not finished."""
        with self._jobs_lock:
            return len(self._jobs)

    def drain(self, grace_s: float) -> None:
        """Take no new evaluations; wait up to `grace_s` for the running ones."""
        self.stopping = True
        with self._jobs_lock:
            jobs = list(self._jobs.values())
        if jobs and grace_s > 0:
            wait_futures(jobs, timeout=grace_s)

    def close(self) -> None:
        self.stopping = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._settled.shutdown(wait=False, cancel_futures=True)

    def expand(self, task_id: str, caller: str) -> ExpandResult:
        params, _, _ = self.tree.params(task_id)
        with self._expand_lock:  # one selection at a time per process; the DB orders processes
            index, entry = self.tree.index(task_id)
            left = budget_left(index, params)
            if left is not None and left <= 0:
                return ExpandResult(task_id=task_id, budget_exhausted=True, budget_left=0,
                                    instructions=texts.BUDGET_EXHAUSTED)
            with self._rng_lock:
                sel = select(index, params, self.rng)
                action = choose_action(index, sel.node_id, params, self.rng)
                ctx_ids = (small_step_context(index, sel.node_id, params) if action == Action.small
                           else large_step_context(index, sel.node_id, params, self.rng))
            expansion_id = "x" + uuid.uuid4().hex[:12]
            expires = self.store.create_expansion(expansion_id=expansion_id, task_id=task_id, node_id=sel.node_id,
                                                  action=action, created_by=caller, ttl_s=params.expansion_ttl_s)
        parent = self.store.get_node(sel.node_id)
        assert parent is not None
        parent_is_root = parent.action == Action.root
        small = action == Action.small
        parent_ctx = ContextNode(node_id=parent.id, action=parent.action, status=_status(parent.status),
                                 speedup=parent.speedup, feedback=parent.feedback,
                                 code=parent.source if small and not parent_is_root else None)
        # A small step's history: its branch's recent nodes, newest first, without the parent (shown as
        # `parent`). A large step's pool: the method's, the parent's own segment included.
        ctx_ids = [i for i in reversed(ctx_ids) if i != sel.node_id] if small else ctx_ids
        details = self.store.node_details(ctx_ids)
        codes = self._history_code(ctx_ids, params.history_code_tokens) if small else self.store.node_sources(ctx_ids)
        ctx_nodes = [ContextNode(node_id=i, action=details[i].action, status=_status(details[i].status),
                                 speedup=details[i].speedup, feedback=details[i].feedback, code=codes.get(i))
                     for i in ctx_ids if i in details]
        facts = self.tree.task_facts(task_id, with_code=True)
        pool = "" if small else texts.pool_sentence(
            len(ctx_nodes), params.c_pool, params.pool_topup, parent_is_root,
            elsewhere=sum(1 for st in index.status if st == Status.correct) - len(ctx_nodes))
        return ExpandResult(
            task_id=task_id, expansion_id=expansion_id, expires_at=iso_utc(expires), action=action,
            instructions=texts.instructions(action, parent_is_root, parent.status, pool),
            task=facts if not small or parent_is_root else facts.model_copy(update={"reference_code": None}),
            parent=parent_ctx, siblings=self.siblings(index, sel.node_id, parent.source),
            parent_profile=self.store.profile_summary(sel.node_id) if small else None,
            history=ctx_nodes if small else [], pool=[] if small else ctx_nodes,
            memory=self.memory.render(facts.reference_code, 1500),
            hardware=self.evaluators.hardware(), budget_left=max(0, left - 1) if left is not None else -1)

    def _history_code(self, ids: list[str], token_budget: int) -> dict[str, str]:
        """Code of the branch history (`ids`, newest first) while it fits in ``token_budget`` (4 chars a token)."""
        if token_budget <= 0 or not ids:
            return {}
        sources = self.store.node_sources(ids)
        room = token_budget * 4
        out: dict[str, str] = {}
        for i in ids:
            code = sources.get(i)
            if code is None or len(code) > room:
                break
            out[i] = code
            room -= len(code)
        return out

    def siblings(self, index: TreeIndex, parent_id: str, parent_source: str | None) -> list[Sibling]:
        """The children already made from ``parent_id`` (the newest MAX_SIBLINGS), with what each changed."""
        kids = index.children_of(parent_id)[-MAX_SIBLINGS:]
        if not kids:
            return []
        details = self.store.node_details(kids)
        # A child's change from its parent never changes: worked out once (difflib is quadratic).
        need = [k for k in kids if k not in self._change_cache]
        sources = self.store.node_sources(need) if need else {}
        for k in need:
            self._change_cache[k] = change_summary(parent_source, sources.get(k, ""))
        out = []
        for k in kids:
            d = details.get(k)
            if d is None:
                continue
            first = first_finding(d.feedback) or ("evaluation still running" if d.status is None else "")
            out.append(Sibling(node_id=k, action=d.action, status=_status(d.status), speedup=d.speedup,
                               summary=first[:160], change=self._change_cache[k]))
        return out

    # -- evaluation ---------------------------------------------------------------

    def submit(self, *, task_id: str, source: str | None, edits: list[Edit] | None, parent_node_id: str | None,
               expansion_id: str | None, caller: str) -> tuple[str, Future[None] | None, bool]:
        """Attach a candidate to the tree and start its evaluation. Returns (node_id, job, duplicate)."""
        if self.stopping:
            raise Unavailable("this server is shutting down and takes no new evaluations; retry in a minute "
                            "(or on another server sharing the data directory)")
        row = self.tree.task(task_id)  # NotFound for an unknown task, before anything else is checked
        params, protocol, name = self.tree.params(task_id)
        parent_id, action = root_id(task_id), Action.large
        answered_by: str | None = None  # the node that already answered the expansion, if one did
        if expansion_id is not None:
            exp = self.store.get_expansion(expansion_id)
            if exp is None or exp.task_id != task_id:
                raise NotFound(f"unknown expansion_id {expansion_id!r} for this task; call expand_node to get one, "
                                "or omit it")
            if exp.consumed:
                answered_by = exp.result_node_id
            if parent_node_id is not None and parent_node_id != exp.node_id:
                raise InvalidRequest(f"expansion {expansion_id} is for node {exp.node_id}, not {parent_node_id}; "
                                "drop parent_node_id or the expansion_id")
            parent_id, action = exp.node_id, Action(exp.action)
        elif parent_node_id is not None:
            parent_id, action = parent_node_id, Action.small
        parent = self.store.get_node(parent_id, with_source=edits is not None)
        if parent is None or parent.task_id != task_id:
            raise NotFound(f"unknown parent_node_id {parent_id!r} for task {task_id}")
        if parent.status == Status.infra_error:
            raise InvalidRequest(f"node {parent_id} failed for infrastructure reasons and is not in the search; "
                            "resubmit its code, or pick another parent")
        if (source is None) == (edits is None):
            raise InvalidRequest("give exactly one of 'source' (the full candidate) or 'edits' (exact replacements "
                            "against the parent node's code)")
        if edits is not None:
            if not edits:
                raise InvalidRequest("'edits' is empty; give at least one {old, new} replacement")
            if parent_node_id is None and expansion_id is None:
                raise InvalidRequest("edits need a parent: pass parent_node_id or expansion_id")
            try:
                source = apply_edits(parent.source or "", edits)
            except EditError as exc:
                raise InvalidRequest(str(exc)) from None
            if len(source) > MAX_SOURCE_CHARS:
                raise InvalidRequest(f"the edited source exceeds {MAX_SOURCE_CHARS} characters")
        assert source is not None
        if not source.strip():
            raise InvalidRequest("the candidate source is empty; send a module that defines class ModelNew")
        check_parsable(source, "the candidate")
        h = source_hash(source)
        if answered_by is not None and self._answered_before(answered_by, h, expansion_id):
            with self._jobs_lock:
                return answered_by, self._jobs.get(answered_by), True
        node_id, created = self.store.create_node(task_id=task_id, parent_id=parent_id, action=action, source=source,
                                                  source_hash=h, created_by=caller, expansion_id=expansion_id,
                                                  owner=self.owner, lease_s=self.config.lease_s)
        if not created:
            with self._jobs_lock:
                return node_id, self._jobs.get(node_id), True
        task = Task(name=name, source=row.source, protocol=protocol)
        settled = static_verdict(source)
        if settled is not None:  # on the device the task was registered on, as a run would have said
            device = (row.validation or {}).get("device", "cpu")
            settled = settled.model_copy(update={"task_id": task_id, "source_hash": h, "device": device,
                                                 "protocol_key": protocol.key(), "elapsed_s": 0.0})
            job = self._settled.submit(self._record, task_id, node_id, task, source, protocol, params, caller,
                                       time.monotonic(), settled)
        else:
            job = self._pool.submit(self._evaluate, task_id, node_id, task, source, protocol, params, caller,
                                    time.monotonic())
        with self._jobs_lock:
            self._jobs[node_id] = job
        job.add_done_callback(functools.partial(self._forget, node_id))
        return node_id, job, False

    def _answered_before(self, node_id: str, h: str, expansion_id: str | None) -> bool:
        """For a kernel (hash `h`) sent with an expansion that `node_id` already answered: True when it is
        the same call again, answered as a duplicate of that node; False when that node's evaluation was
        lost (infra_error), so the same code runs again. Different code needs an expansion of its own."""
        node = self.store.get_node(node_id, with_source=False)
        if node is None or node.source_hash != h:
            raise InvalidRequest(f"expansion {expansion_id} was already used (node {node_id}); call expand_node "
                                 "again, or pass parent_node_id (without expansion_id) to place the kernel yourself")
        return node.status != Status.infra_error

    def _forget(self, node_id: str, _job: object = None) -> None:
        with self._jobs_lock:
            self._jobs.pop(node_id, None)

    def _evaluate(self, task_id: str, node_id: str, task: Task, source: str, protocol: EvalProtocol,
                  params: SearchParams, caller: str, submitted: float) -> None:
        try:
            result = self.evaluators.get().evaluate(task, source, protocol)
        except Exception as exc:  # the evaluator promises not to raise; if it does, it is our fault
            log.exception("evaluator crashed on %s", node_id)
            result = EvalResult(status=Status.infra_error, error=ErrorInfo(
                error_class="InfraError", message=f"the evaluator failed ({type(exc).__name__}); resubmit to retry"))
        self._record(task_id, node_id, task, source, protocol, params, caller, submitted, result)

    def _record(self, task_id: str, node_id: str, task: Task, source: str, protocol: EvalProtocol,
                params: SearchParams, caller: str, submitted: float, result: EvalResult) -> None:
        """Store a node's result with its reward (and, for a correct kernel on a GPU, its profile), and tell the
        skill memory."""
        status = result.status
        infra = result.status is Status.infra_error
        reward = None if infra else reward_for(params, status, result.speedup)
        prof = self._profile_in_loop(node_id, task, source, protocol, result)
        feedback = result.feedback()
        extra = nan_hint(source) if result.status is Status.nan_output and not (result.error and result.error.hint) \
            else None
        if extra:
            feedback += f"\nhint: {extra}"
        if prof is not None:
            feedback += "\nprofile: " + prof.summary.splitlines()[0] if prof.summary else ""
        kept = self.store.finish_node(node_id, status=status, result=result.model_dump(mode="json", exclude_none=True),
                                      feedback=self.tree.scrub(feedback), speedup=result.speedup, reward=reward,
                                      owner=self.owner)
        if kept and prof is not None:
            self.store.save_profile(node_id, prof.device, prof.triton_share, prof.model_dump(mode="json"))
        self.metrics.evaluations.labels(status).inc()
        self.metrics.evaluation_seconds.observe(time.monotonic() - submitted)
        if not kept:
            log.warning("node %s: result dropped, %s", node_id,
                        "it came after this server's shutdown had marked the evaluation unfinished" if self.stopping
                        else "another server settled it after this one's lease expired")
            return
        if infra:
            return
        try:
            if result.ok:
                self.memory.note_correct(task_id, node_id, source)
            else:
                self.memory.experience(task_id, node_id, result, caller)
        except Exception:  # memory is advisory; never lose a result over it
            log.exception("skill memory update failed for %s", node_id)

    def profile(self, node_id: str) -> ProfileResult:
        """The evaluator's profile of a correct node (on a GPU: per-kernel times, Triton share, roofline)."""
        node = self.store.get_node(node_id)
        if node is None:
            raise NotFound(f"unknown node_id {node_id!r}; node ids look like '<task_id>-<n>' (see best_candidates)")
        if node.status != Status.correct:
            raise InvalidRequest(f"node {node_id} is {_status(node.status)}, and only a correct kernel can be "
                                 "profiled; pick one from best_candidates")
        task_id = node.task_id
        _, protocol, name = self.tree.params(task_id)
        task = Task(name=name, source=self.tree.task(task_id).source, protocol=protocol)
        out = self._profile(node_id, task, node.source or "", protocol, (node.result or {}).get("device"))
        if out.profiled:
            self.store.save_profile(node_id, out.device, out.triton_share, out.model_dump(mode="json"))
        return out

    def _profile(self, node_id: str, task: Task, source: str, protocol: EvalProtocol, ran_on: str | None
                 ) -> ProfileResult:
        # A fleet profiles on the GPU that timed the node, so profile and timing describe one card.
        rep = self.evaluators.get().profile(task, source, protocol, device=ran_on)
        runs = max(1, rep.profiled_runs)
        return ProfileResult(
            node_id=node_id, task_id=task.task_id, device=rep.device, profiled=rep.profiled,
            summary=self.tree.scrub(rep.summary), candidate_ms=rep.candidate_ms,
            device_ms_per_run=rep.device_ms_per_run,
            triton_share=rep.triton_share,
            kernels=[KernelRow(name=k.name, triton=k.triton, calls_per_run=k.calls / runs, ms_per_run=k.ms_per_run,
                               share=k.share) for k in rep.kernels],
            triton_kernels=[TritonKernelRow(name=t.name, n_regs=t.n_regs, n_spills=t.n_spills,
                                            shared_bytes=t.shared_bytes, num_warps=t.num_warps,
                                            num_stages=t.num_stages) for t in rep.triton_kernels],
            floor_bytes=rep.floor_bytes, floor_flops=rep.floor_flops, floor_ms=rep.floor_ms, vs_floor=rep.vs_floor,
            achieved_gbps=rep.achieved_gbps, bandwidth_fraction=rep.bandwidth_fraction,
            achieved_tflops=rep.achieved_tflops, flops_fraction=rep.flops_fraction, notes=list(rep.notes))

    def _profile_in_loop(self, node_id: str, task: Task, source: str, protocol: EvalProtocol,
                         result: EvalResult) -> ProfileResult | None:
        """On a GPU, every correct kernel is profiled as it is evaluated; never at the cost of its result."""
        if not result.ok or not self.evaluators.get().is_gpu:
            return None
        try:
            out = self._profile(node_id, task, source, protocol, result.device or None)
        except Exception:
            log.exception("profiling %s failed; its result stands", node_id)
            return None
        return out if out.profiled else None

    def node_result(self, node_id: str, duplicate: bool = False, expansion_id: str | None = None) -> EvaluateResult:
        """What evaluate_kernel answers for `node_id`; a `duplicate` sent with `expansion_id` says whether
        that expansion is still open."""
        node = self.store.get_node(node_id, with_source=False)
        if node is None:
            raise NotFound(f"unknown node_id {node_id!r}")
        task_id = node.task_id
        params, _, _ = self.tree.params(task_id)
        index, entry = self.tree.index(task_id)
        left = budget_left(index, params)
        note = None
        if duplicate:
            exp = self.store.get_expansion(expansion_id) if expansion_id else None
            note = texts.duplicate_note(node_id, expansion_id, still_open=exp is not None and not exp.consumed)
        return EvaluateResult(
            task_id=task_id, node_id=node_id, parent_id=node.parent_id, status=_status(node.status),
            duplicate=duplicate, note=note, feedback=node.feedback if node.status else texts.PENDING,
            speedup=node.speedup, reward=node.reward, runtime_ms=_runtime_ms(node.result),
            best=self.tree.best(index, entry), budget_left=left if left is not None else -1)
