"""The MCP tools: thin wrappers over the application core, with annotations and scope checks (server process).

This is where the core meets MCP. Tools are plain functions, which the SDK runs on worker threads; the one
exception is evaluate_kernel, which waits for an evaluation without holding a thread. Every domain error of
the core (and a missing scope) becomes a tool error here, in `_tool_errors`, with the server's paths
scrubbed from its message.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
import orjson
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from ..core.config import ServerConfig
from ..core.errors import ServiceError
from ..core.services import Service
from ..core.tool_models import (
    MAX_EDITS,
    MAX_EXCERPT_CHARS,
    MAX_ID_CHARS,
    MAX_NAME_CHARS,
    MAX_RULE_CHARS,
    BestCandidatesResult,
    Edit,
    EvaluateResult,
    ExpandResult,
    ImportMemoryResult,
    KeepApartResult,
    ListTasksResult,
    MemoryDocument,
    MergeRulesResult,
    NodeId,
    NodeInfo,
    ProfileResult,
    ProtocolOverrides,
    RecordFailureResult,
    RegisterTaskResult,
    RuleDetail,
    RuleGroupsResult,
    SearchOverrides,
    SkillMemoryResult,
    Source,
    SynthesisResult,
    TaskId,
    TreeSummary,
    UnmergeResult,
)
from .auth import ScopeError, current_caller

READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, destructive_hint=False, open_world_hint=False)
# register_task: repeating it returns the same task, nothing is overwritten.
REGISTER = ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=False, open_world_hint=False)
# evaluate_kernel: identical code is reported as a duplicate, so repeating it adds nothing.
EVALUATE = ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=False, open_world_hint=False)
# profile_kernel: runs the kernel again under a profiler; it keeps the latest report (best_candidates shows its
# Triton share), so a repeat changes nothing else.
PROFILE = ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=False, open_world_hint=False)
# expand_node / record_failure: every call adds an expansion or an occasion.
APPEND = ToolAnnotations(read_only_hint=False, idempotent_hint=False, destructive_hint=False, open_world_hint=False)
# retire_rule / edit_rule: change a rule in place (a retired rule is no longer served; an edit replaces the
# wording); repeating the call leaves the same state.
CHANGE_RULE = ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=True,
                              open_world_hint=False)
# merge_rules / unmerge_rules: each call makes or undoes one recorded merge.
MERGE_RULES = ToolAnnotations(read_only_hint=False, idempotent_hint=False, destructive_hint=False,
                              open_world_hint=False)
# import_memory: merges counts; importing the same document again adds nothing.
MERGE = ToolAnnotations(read_only_hint=False, idempotent_hint=True, destructive_hint=False, open_world_hint=False)
# synthesize_task: reads the task list; each call may draw different seeds and operators unless seeded.
SYNTH = ToolAnnotations(read_only_hint=True, idempotent_hint=False, destructive_hint=False, open_world_hint=False)
RuleId = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, description="a rule id, e.g. 'r-0123456789'")]


F = TypeVar("F", bound=Callable[..., Any])


def compact(result: Any) -> Any:
    """A tool's typed result as it goes out: its structured content, and the same object as compact JSON
    text (the SDK would write it indented)."""
    if not isinstance(result, BaseModel):
        return result
    data = result.model_dump(mode="json")
    return CallToolResult(content=[TextContent(type="text", text=orjson.dumps(data).decode())],
                          structured_content=data)


def register_tools(mcp: MCPServer, svc: Service, cfg: ServerConfig) -> None:
    """Register every tool of the server on `mcp`, answering from `svc` under the settings `cfg`."""

    @contextmanager
    def _tool_errors() -> Iterator[None]:
        """The one place where the core's errors become tool errors (never showing the server's paths)."""
        try:
            yield
        except (ServiceError, ScopeError) as exc:
            raise ToolError(svc.scrub(str(exc))) from None

    def tool(annotations: ToolAnnotations, title: str) -> Callable[[F], F]:
        """Register `fn` as a tool whose domain errors reach the agent as tool errors."""

        def register(fn: F) -> F:
            if inspect.iscoroutinefunction(fn):
                @functools.wraps(fn)
                async def call_async(*args: Any, **kwargs: Any) -> Any:
                    with _tool_errors():
                        return compact(await fn(*args, **kwargs))

                mcp.tool(annotations=annotations, title=title)(call_async)
            else:
                @functools.wraps(fn)
                def call(*args: Any, **kwargs: Any) -> Any:
                    with _tool_errors():
                        return compact(fn(*args, **kwargs))

                mcp.tool(annotations=annotations, title=title)(call)
            return fn

        return register

    def caller(scope: str) -> str:
        c = current_caller(cfg.auth_required, cfg.default_caller)
        c.require(scope)
        return c.name

    @tool(annotations=REGISTER, title="Register a task")
    def register_task(
        source: Annotated[Source | None, Field(description="reference module: class Model(nn.Module), "
                                                            "get_inputs(), get_init_inputs()")] = None,
        path: Annotated[str | None, Field(max_length=4096, description="a task file inside the server's task "
                                                                       "roots, instead of source")] = None,
        name: Annotated[str | None, Field(max_length=MAX_NAME_CHARS, description="a short name")] = None,
        search: Annotated[SearchOverrides | None, Field(description="per-task search settings; omitted ones keep "
                                                                    "the method's defaults")] = None,
        protocol: Annotated[ProtocolOverrides | None, Field(description="per-task correctness and timing "
                                                                        "settings")] = None,
        synthetic: Annotated[bool, Field(description="a task written from synthesize_task: accepted only if it "
                                                     "runs and is not degenerate")] = False,
    ) -> RegisterTaskResult:
        """Register a PyTorch reference module as a task (validates it; the same source returns the same task)."""
        who = caller("write")
        return svc.tasks.register_task( source=source, path=path, name=name, search=search, protocol=protocol,
                         caller=who, synthetic=synthetic)

    @tool(annotations=READ, title="List tasks")
    def list_tasks() -> ListTasksResult:
        """List registered tasks with their node counts and best speedup."""
        caller("read")
        return svc.tasks.list_tasks()

    @tool(annotations=READ, title="Read a node")
    def get_node(
        node_id: NodeId,
        include_code: Annotated[bool, Field(description="also return the node's source")] = False,
    ) -> NodeInfo:
        """One node of a search tree: status, metrics, feedback, parent (code only with include_code)."""
        caller("read")
        return svc.tasks.get_node(node_id, include_code)

    @tool(annotations=READ, title="Summarize a search tree")
    def tree_summary(
        task_id: TaskId,
        top: Annotated[int, Field(ge=1, le=50, description="how many top nodes the text tree shows")] = 10,
    ) -> TreeSummary:
        """Counts by status, the best node, depth, budget left, and a compact text tree of the top nodes."""
        caller("read")
        return svc.tasks.tree_summary(task_id, top)

    @tool(annotations=APPEND, title="Choose the next step")
    def expand_node(task_id: TaskId) -> ExpandResult:
        """Select a node and a step (small refinement or large restructuring) by the search rules, and return
        what is needed to write the next kernel: instructions; the task's inputs, outputs, tolerance and device;
        the siblings already tried from this parent; for a small step the parent's code and feedback and the
        branch history, for a large step the pool (the best kernel of each segment on its path) and the
        reference; skill memory, hardware facts, and an expansion_id for evaluate_kernel."""
        who = caller("write")
        return svc.search.expand(task_id, who)

    # The one async tool: waiting for an evaluation must not hold one of the SDK's worker threads.
    @tool(annotations=EVALUATE, title="Evaluate a kernel")
    async def evaluate_kernel(
        task_id: TaskId,
        ctx: Context,
        source: Annotated[Source | None, Field(description="the full candidate module (class ModelNew)")] = None,
        edits: Annotated[list[Edit] | None, Field(max_length=MAX_EDITS, description="exact replacements against "
                                                  "the parent node's code, applied in order")] = None,
        parent_node_id: Annotated[str | None, Field(max_length=100, description=(
            "the node this kernel refines, as a small step (edits apply to its code). Give it without "
            "expansion_id to choose the node yourself, e.g. to repair a node that just failed (the repair path); "
            "with expansion_id leave it out (it must be the expansion's node)"))] = None,
        expansion_id: Annotated[str | None, Field(max_length=100, description="from expand_node: the kernel "
                                                  "attaches to the node and step it chose")] = None,
    ) -> EvaluateResult:
        """Check a candidate for correctness and speed and attach it to the tree: under the expansion's node
        (expansion_id), under parent_node_id as a small step (the repair path of a failed node), else under the
        root as a large step. A failing kernel is a result with a status and feedback. Identical code is not run
        again: the earlier node's result comes back with duplicate=true, and the expansion stays open for a
        different kernel. Long evaluations return status 'pending': poll get_node with the node_id."""
        who = caller("write")
        node_id, job, duplicate = await anyio.to_thread.run_sync(functools.partial(
            svc.search.submit, task_id=task_id, source=source, edits=edits, parent_node_id=parent_node_id,
            expansion_id=expansion_id, caller=who))
        if job is not None:
            await _await_job(job, ctx, node_id, cfg.wait_limit_s, cfg.progress_interval_s)
        return await anyio.to_thread.run_sync(svc.search.node_result, node_id, duplicate, expansion_id)

    @tool(annotations=READ, title="Best kernels")
    def best_candidates(
        task_id: TaskId,
        k: Annotated[int, Field(ge=1, le=50, description="how many kernels to return")] = 5,
        include_code: Annotated[bool, Field(description="also return each kernel's source")] = False,
    ) -> BestCandidatesResult:
        """The task's top correct kernels, fastest first, with metrics (code on request)."""
        caller("read")
        return svc.tasks.best_candidates(task_id, k, include_code)

    @tool(annotations=PROFILE, title="Profile a kernel")
    def profile_kernel(node_id: NodeId) -> ProfileResult:
        """Where a correct kernel's time goes: time per launched kernel (Triton and other), the share of device
        time in Triton kernels, achieved bandwidth and FLOP/s against the device's measured peaks and the
        distance to the task's floor, registers and spills where Triton reports them. Without a GPU only the
        task's floor (bytes, FLOPs) is reported, and the summary says why."""
        caller("read")
        return svc.search.profile(node_id)

    @tool(annotations=READ, title="Skill memory")
    def get_skill_memory(
        task_id: Annotated[str | None, Field(max_length=100, description="rank rules by relevance to it")] = None,
        token_budget: Annotated[int, Field(ge=50, le=20000, description="size limit of `rendered`")] = 1500,
        include_candidates: Annotated[bool, Field(description="also unconfirmed rules (seen on fewer distinct tasks "
                                                              "than the threshold), marked and ranked below the "
                                                              "confirmed ones")] = True,
        include_signatures: Annotated[bool, Field(description="also frequent failure signatures that no rule "
                                                              "explains yet")] = False,
    ) -> SkillMemoryResult:
        """The team's validity rules (distilled from past failures): confirmed ones first, then unconfirmed ones
        (yours and the team's, marked), each ranked by relevance to the task and frequency, with a ready-to-paste
        rendering and the memory's counts."""
        caller("read")
        return svc.skills.skill_memory(task_id, token_budget, include_candidates, include_signatures)

    @tool(annotations=APPEND, title="Record a failure rule")
    def record_failure(
        rule: Annotated[str, Field(min_length=1, max_length=MAX_RULE_CHARS,
                                   description="one-sentence validity rule: do X, not Y. Name the cause and "
                                               "the fix, not only what was seen")],
        node_id: Annotated[str | None, Field(max_length=100, description="the failing node it explains")] = None,
        task_id: Annotated[str | None, Field(max_length=100, description="the task the failure happened on, when "
                                                                        "no node_id is given")] = None,
        error_excerpt: Annotated[str | None, Field(max_length=MAX_EXCERPT_CHARS, description="the error message "
                                                   "the rule explains, as the feedback gave it")] = None,
        same_as: Annotated[str | None, Field(max_length=MAX_ID_CHARS, description=(
            "the rule_id of a stored rule that says the same thing (taken from `closest` of an earlier answer): "
            "this occasion then counts for that rule"))] = None,
        distinct_from: Annotated[list[RuleId] | None, Field(max_length=20, description=(
            "rule_ids of stored rules you judged different from this one (e.g. from `closest`): they are never "
            "merged with it or proposed for it again"))] = None,
    ) -> RecordFailureResult:
        """Submit a rule distilled from a failure. The server merges it by itself only on evidence that cannot be
        a near miss (the same wording; or the same error, naming the construct the rule forbids, with the same
        fix), and lists every rule it merged. Otherwise the answer lists up to 5 `closest` stored rules: if one
        of them says the same thing (same mistake, same fix, in other words), call record_failure again with the
        same arguments plus same_as=<its rule_id>. Do not use same_as for a rule about a different mistake on the
        same API (two different tl.dot mistakes are two rules); say so with keep_rules_apart instead."""
        who = caller("write")
        return svc.skills.record_failure(rule=rule, node_id=node_id, task_id=task_id, error_excerpt=error_excerpt,
                                         caller=who, same_as=same_as, distinct_from=distinct_from)

    @tool(annotations=READ, title="Groups of look-alike rules")
    def list_rule_groups(
        limit: Annotated[int, Field(ge=1, le=100, description="at most this many groups")] = 20,
    ) -> RuleGroupsResult:
        """Groups of stored rules that look alike (shared constructs, similar wording, the same failures), largest
        first, for the distill pass: merge with merge_rules the rules of a group that say the same thing."""
        caller("read")
        return svc.skills.rule_groups(limit)

    @tool(annotations=MERGE_RULES, title="Merge rules")
    def merge_rules(
        rule_ids: Annotated[list[RuleId], Field(min_length=1, max_length=50, description="rules that say the "
                                                                                          "same thing")],
        into: Annotated[str | None, Field(max_length=MAX_ID_CHARS, description="the rule to keep (default: the "
                                                                                "most frequent)")] = None,
        reason: Annotated[str | None, Field(max_length=500, description="why they are one rule")] = None,
    ) -> MergeRulesResult:
        """Merge rules you judged to say the same thing into one. Every member keeps its wording, evidence and
        count (the merged rule counts their distinct tasks); the merge is recorded with who made it and can be
        undone with unmerge_rules(merge_id)."""
        who = caller("write")
        return svc.memory.merge(rule_ids, into, reason, who)

    @tool(annotations=MERGE_RULES, title="Keep rules apart")
    def keep_rules_apart(
        rule_ids: Annotated[list[RuleId], Field(min_length=2, max_length=50, description="rules you judged to be "
                                                                                          "different mistakes")],
    ) -> KeepApartResult:
        """Record that these rules are different (for example a pair list_rule_groups or `closest` proposed that
        you judged apart): they are never merged by the memory, proposed for one another or grouped together
        again. merge_rules can still join them later."""
        who = caller("write")
        return svc.memory.keep_apart(rule_ids, who)

    @tool(annotations=MERGE_RULES, title="Undo a merge")
    def unmerge_rules(
        merge_id: Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, description="from merge_rules or "
                                                                                          "record_failure")],
    ) -> UnmergeResult:
        """Undo one merge: the rules it merged are separate rules again, with their own wording, evidence and
        counts."""
        who = caller("write")
        return svc.memory.unmerge(merge_id, who)

    @tool(annotations=CHANGE_RULE, title="Retire a rule")
    def retire_rule(rule_id: RuleId) -> RuleDetail:
        """Stop serving a rule (admin). Equivalent rules recorded later merge into it and stay retired."""
        who = caller("admin")
        return svc.memory.retire(rule_id, who)

    @tool(annotations=CHANGE_RULE, title="Edit a rule")
    def edit_rule(
        rule_id: RuleId,
        text: Annotated[str, Field(min_length=1, max_length=MAX_RULE_CHARS, description="the new wording")],
    ) -> RuleDetail:
        """Replace a rule's wording (admin); the edited wording is kept when equivalent rules merge into it."""
        who = caller("admin")
        return svc.memory.edit(rule_id, text, who)

    @tool(annotations=READ, title="Export the skill memory")
    def export_memory() -> MemoryDocument:
        """The whole skill memory (rules, evidence, experiences) as a JSON document for import_memory or
        `adaexplore memory import`."""
        caller("read")
        return svc.memory.export()

    @tool(annotations=MERGE, title="Import a skill memory")
    def import_memory(
        document: Annotated[dict[str, Any], Field(description="a document from export_memory")],
    ) -> ImportMemoryResult:
        """Merge an exported memory into this one (admin): equivalent rules merge and their counts add up;
        importing the same document twice changes nothing."""
        who = caller("admin")
        return svc.memory.import_(document, who)

    @tool(annotations=SYNTH, title="Brief for a new task")
    def synthesize_task(
        n_seeds: Annotated[int, Field(ge=0, le=5, description="registered tasks to use as seeds")] = 2,
        n_ops: Annotated[int, Field(ge=0, le=6, description="torch.nn operators to work in")] = 2,
        seed: Annotated[int | None, Field(description="random seed, for a reproducible brief")] = None,
    ) -> SynthesisResult:
        """Instructions for writing one new task by mutating registered tasks with new operators; register the
        result with register_task(synthetic=true)."""
        caller("read")
        return svc.skills.synthesize(n_seeds, n_ops, seed)

    for registered in mcp._tool_manager.list_tools():
        # Docstrings carry their source indentation; tool pickers show it raw. One line, single spaces.
        registered.description = " ".join((registered.description or "").split())


async def _await_job(job: Future[None], ctx: Context, node_id: str, limit_s: float, every_s: float) -> None:
    """Wait for an evaluation up to `limit_s` without holding a thread, telling the client every `every_s`
    how long it has run: the job wakes this wait the moment it ends."""
    done = asyncio.wrap_future(job)
    start = time.monotonic()
    while not done.done():
        left = limit_s - (time.monotonic() - start)
        if left <= 0:
            return
        await asyncio.wait([done], timeout=min(every_s, left))
        if done.done():
            break
        try:
            await ctx.report_progress(round(time.monotonic() - start, 1), limit_s, f"evaluating {node_id}")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # the client hung up; the evaluation goes on and its node keeps the result
    if not done.cancelled():
        done.exception()  # the evaluation logs its own failures; this only marks the outcome as seen
