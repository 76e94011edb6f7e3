"""The MCP tools: thin async wrappers over the Service, with annotations and scope checks (server process)."""

from __future__ import annotations

import time
from typing import Annotated, Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from .auth import ScopeError, current_caller
from .models import (
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
from .service import Service

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


def register_tools(mcp: MCPServer, svc: Service) -> None:
    cfg = svc.config

    def caller(scope: str) -> str:
        c = current_caller(cfg.auth_required, cfg.default_caller)
        try:
            c.require(scope)
        except ScopeError as exc:
            raise ToolError(str(exc)) from None
        return c.name

    async def run(fn, *args, **kwargs):
        try:
            return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
        except ToolError as exc:  # never show a remote caller the server's paths
            raise ToolError(svc.scrub(str(exc))) from None

    @mcp.tool(annotations=REGISTER, title="Register a task")
    async def register_task(
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
        return await run(svc.register_task, source=source, path=path, name=name, search=search, protocol=protocol,
                         caller=who, synthetic=synthetic)

    @mcp.tool(annotations=READ, title="List tasks")
    async def list_tasks() -> ListTasksResult:
        """List registered tasks with their node counts and best speedup."""
        caller("read")
        return await run(svc.list_tasks)

    @mcp.tool(annotations=READ, title="Read a node")
    async def get_node(
        node_id: NodeId,
        include_code: Annotated[bool, Field(description="also return the node's source")] = False,
    ) -> NodeInfo:
        """One node of a search tree: status, metrics, feedback, parent (code only with include_code)."""
        caller("read")
        return await run(svc.get_node, node_id, include_code)

    @mcp.tool(annotations=READ, title="Summarize a search tree")
    async def tree_summary(
        task_id: TaskId,
        top: Annotated[int, Field(ge=1, le=50, description="how many top nodes the text tree shows")] = 10,
    ) -> TreeSummary:
        """Counts by status, the best node, depth, budget left, and a compact text tree of the top nodes."""
        caller("read")
        return await run(svc.tree_summary, task_id, top)

    @mcp.tool(annotations=APPEND, title="Choose the next step")
    async def expand_node(task_id: TaskId) -> ExpandResult:
        """Select a node and a step (small refinement or large restructuring) by the search rules, and return
        what is needed to write the next kernel: instructions; the task's inputs, outputs, tolerance and device;
        the siblings already tried from this parent; for a small step the parent's code and feedback and the
        branch history, for a large step the pool of strong kernels and the reference; skill memory, hardware
        facts, and an expansion_id for evaluate_kernel."""
        who = caller("write")
        return await run(svc.expand, task_id, who)

    @mcp.tool(annotations=EVALUATE, title="Evaluate a kernel")
    async def evaluate_kernel(
        task_id: TaskId,
        ctx: Context,
        source: Annotated[Source | None, Field(description="the full candidate module (class ModelNew)")] = None,
        edits: Annotated[list[Edit] | None, Field(max_length=MAX_EDITS, description="exact replacements against "
                                                  "the parent node's code, applied in order")] = None,
        parent_node_id: Annotated[str | None, Field(max_length=100, description="parent for edits or for "
                                                    "placing the node; defaults to the expansion's node")] = None,
        expansion_id: Annotated[str | None, Field(max_length=100, description="from expand_node")] = None,
    ) -> EvaluateResult:
        """Check a candidate for correctness and speed and attach it to the tree. A failing kernel is a result
        with a status and feedback. Identical code is not run again (duplicate=true). Long evaluations return
        status 'pending': poll get_node with the node_id."""
        who = caller("write")
        node_id, job, duplicate = await run(svc.submit, task_id=task_id, source=source, edits=edits,
                                            parent_node_id=parent_node_id, expansion_id=expansion_id, caller=who)
        if job is not None:
            start = time.monotonic()
            last_report = start
            limit = cfg.wait_limit_s
            while not job.done():
                now = time.monotonic()
                if now - start >= limit:
                    break
                if now - last_report >= cfg.progress_interval_s:
                    last_report = now
                    try:
                        await ctx.report_progress(round(now - start, 1), limit, f"evaluating {node_id}")
                    except Exception:
                        pass
                await anyio.sleep(0.05)
        return await run(svc.node_result, node_id, duplicate)

    @mcp.tool(annotations=READ, title="Best kernels")
    async def best_candidates(
        task_id: TaskId,
        k: Annotated[int, Field(ge=1, le=50, description="how many kernels to return")] = 5,
        include_code: Annotated[bool, Field(description="also return each kernel's source")] = False,
    ) -> BestCandidatesResult:
        """The task's top correct kernels, fastest first, with metrics (code on request)."""
        caller("read")
        return await run(svc.best_candidates, task_id, k, include_code)

    @mcp.tool(annotations=PROFILE, title="Profile a kernel")
    async def profile_kernel(node_id: NodeId) -> ProfileResult:
        """Where a correct kernel's time goes: time per launched kernel (Triton and other), the share of device
        time in Triton kernels, achieved bandwidth and FLOP/s against the device's measured peaks and the
        distance to the task's floor, registers and spills where Triton reports them. Without a GPU only the
        task's floor (bytes, FLOPs) is reported, and the summary says why."""
        caller("read")
        return await run(svc.profile, node_id)

    @mcp.tool(annotations=READ, title="Skill memory")
    async def get_skill_memory(
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
        return await run(svc.skill_memory, task_id, token_budget, include_candidates, include_signatures)

    @mcp.tool(annotations=APPEND, title="Record a failure rule")
    async def record_failure(
        rule: Annotated[str, Field(min_length=1, max_length=MAX_RULE_CHARS,
                                   description="one-sentence validity rule: do X, not Y")],
        node_id: Annotated[str | None, Field(max_length=100, description="the failing node it explains")] = None,
        task_id: Annotated[str | None, Field(max_length=100, description="the task the failure happened on, when "
                                                                        "no node_id is given")] = None,
        error_excerpt: Annotated[str | None, Field(max_length=MAX_EXCERPT_CHARS, description="the error message "
                                                   "the rule explains, as the feedback gave it")] = None,
        same_as: Annotated[str | None, Field(max_length=MAX_ID_CHARS, description=(
            "the rule_id of a stored rule that says the same thing (taken from `closest` of an earlier answer): "
            "this occasion then counts for that rule"))] = None,
    ) -> RecordFailureResult:
        """Submit a rule distilled from a failure. The server merges it by itself only on strong evidence (the
        same wording; the same construct with the same named failure, e.g. tl.arange + constexpr; the same
        forbidden construct with the same fix; or the same error naming the construct), and lists every rule it
        merged. Otherwise the answer lists up to 3 `closest` stored rules: if one of them
        says the same thing (same mistake, same fix, in other words), call record_failure again with the same
        arguments plus same_as=<its rule_id>. Do not use same_as for a rule about a different mistake on the same
        API (two different tl.dot mistakes are two rules)."""
        who = caller("write")
        return await run(svc.record_failure, rule=rule, node_id=node_id, task_id=task_id,
                         error_excerpt=error_excerpt, caller=who, same_as=same_as)

    @mcp.tool(annotations=READ, title="Groups of look-alike rules")
    async def list_rule_groups(
        limit: Annotated[int, Field(ge=1, le=100, description="at most this many groups")] = 20,
    ) -> RuleGroupsResult:
        """Groups of stored rules that look alike (shared constructs, similar wording, the same failures), largest
        first, for the distill pass: merge with merge_rules the rules of a group that say the same thing."""
        caller("read")
        return await run(svc.rule_groups, limit)

    @mcp.tool(annotations=MERGE_RULES, title="Merge rules")
    async def merge_rules(
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
        return await run(svc.memory.merge, rule_ids, into, reason, who)

    @mcp.tool(annotations=MERGE_RULES, title="Undo a merge")
    async def unmerge_rules(
        merge_id: Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, description="from merge_rules or "
                                                                                          "record_failure")],
    ) -> UnmergeResult:
        """Undo one merge: the rules it merged are separate rules again, with their own wording, evidence and
        counts."""
        who = caller("write")
        return await run(svc.memory.unmerge, merge_id, who)

    @mcp.tool(annotations=CHANGE_RULE, title="Retire a rule")
    async def retire_rule(rule_id: RuleId) -> RuleDetail:
        """Stop serving a rule (admin). Equivalent rules recorded later merge into it and stay retired."""
        who = caller("admin")
        return await run(svc.memory.retire, rule_id, who)

    @mcp.tool(annotations=CHANGE_RULE, title="Edit a rule")
    async def edit_rule(
        rule_id: RuleId,
        text: Annotated[str, Field(min_length=1, max_length=MAX_RULE_CHARS, description="the new wording")],
    ) -> RuleDetail:
        """Replace a rule's wording (admin); the edited wording is kept when equivalent rules merge into it."""
        who = caller("admin")
        return await run(svc.memory.edit, rule_id, text, who)

    @mcp.tool(annotations=READ, title="Export the skill memory")
    async def export_memory() -> MemoryDocument:
        """The whole skill memory (rules, evidence, experiences) as a JSON document for import_memory or
        `adaexplore memory import`."""
        caller("read")
        return await run(svc.memory.export)

    @mcp.tool(annotations=MERGE, title="Import a skill memory")
    async def import_memory(
        document: Annotated[dict[str, Any], Field(description="a document from export_memory")],
    ) -> ImportMemoryResult:
        """Merge an exported memory into this one (admin): equivalent rules merge and their counts add up;
        importing the same document twice changes nothing."""
        who = caller("admin")
        return await run(svc.memory.import_, document, who)

    @mcp.tool(annotations=SYNTH, title="Brief for a new task")
    async def synthesize_task(
        n_seeds: Annotated[int, Field(ge=0, le=5, description="registered tasks to use as seeds")] = 2,
        n_ops: Annotated[int, Field(ge=0, le=6, description="torch.nn operators to work in")] = 2,
        seed: Annotated[int | None, Field(description="random seed, for a reproducible brief")] = None,
    ) -> SynthesisResult:
        """Instructions for writing one new task by mutating registered tasks with new operators; register the
        result with register_task(synthetic=true)."""
        caller("read")
        return await run(svc.synthesize, n_seeds, n_ops, seed)

    for tool in mcp._tool_manager.list_tools():
        # Docstrings carry their source indentation; tool pickers show it raw. One line, single spaces.
        tool.description = " ".join((tool.description or "").split())
