"""The contracts of every tool: typed inputs and outputs (these become the JSON schemas).

Imported in the server process: the core's services return these, and the face hands them to MCP.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...search import REWARD_TABLE

MAX_SOURCE_CHARS = 256 * 1024
MAX_EDITS = 64
MAX_NAME_CHARS = 200
MAX_RULE_CHARS = 2000
MAX_EXCERPT_CHARS = 4000
MAX_ID_CHARS = 100

TaskId = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, description="a task id from register_task")]
NodeId = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, description="a node id (e.g. 'abc123-7')")]
Source = Annotated[str, Field(max_length=MAX_SOURCE_CHARS, description="full Python source (at most 256 KiB)")]


GLOSSARY: dict[str, str] = {
    "node_id": "the node's id (e.g. '<task_id>-7')",
    "parent_id": "the parent node's id; null for the root",
    "action": "how the node was made: 'root' (the reference), 'large' or 'small' step",
    "speedup": "reference time / kernel time; null when not timed (no GPU) or not correct",
    "reward": "the search's reward for the node (paper reward: 0 to 1.6; evaluate_kernel's schema gives it per "
              "status)",
    "runtime_ms": "mean kernel time in milliseconds; null when not timed",
    "created_by": "the caller that submitted it",
    "code": "the source, only when asked for",
    "task_id": "the task's id",
    "name": "a short name",
    "candidates": "the top correct kernels, fastest first",
    "rule_id": "the rule's id",
    "text": "the rule's wording",
    "count": "occasions it was seen on",
    "active": "served to agents: confirmed, not contradicted, not retired",
    "contradicted": "contradicted by correct kernels, so not served",
    "retired": "retired by an admin, so not served",
    "who": "callers that recorded it",
    "error_class": "the exception class of the failures",
    "available": "false when the skill memory could not be read just now",
    "active_rules": "rules served to agents now",
    "rules_added": "rules new to this memory",
    "rules_merged": "imported rules merged into equivalent ones here",
    "evidence_added": "occasions added to existing rules",
    "experiences_added": "failed evaluations added",
    "contradictions_added": "contradicting correct kernels added",
    "why": "why it is listed here",
    "total_rules": "rules stored",
    "best_speedup": "speedup of the fastest correct kernel; null if none or not timed",
    "flags": "codes of the problems found at validation",
    "tasks": "the registered tasks",
    "merged": "true when the rule was merged into a stored equivalent",
    "merged_into_text": "the wording of the rule it was merged into",
    "reason": "why the occasion was not counted, if it was not",
    "correctness_trials": "random input sets every candidate must match (default 5)",
    "tolerance": "tolerance profile for atol and rtol: default (0.01), strict (1e-4), fp32 (1e-5), loose (0.05)",
    "warmup_runs": "untimed runs before timing (default 10)",
    "timed_runs": "timed runs per candidate (default 100)",
    "timeout_s": "seconds a candidate may run before it is stopped (default 120)",
    "message": "what it means",
    "synthetic": "written by an agent from a synthesis brief",
    "root_node_id": "the root of the task's tree (the reference module)",
    "baseline_note": "why there is no baseline time, when there is none",
    "device": "where candidates run: 'cpu' (Triton interpreter) or a CUDA device",
    "max_steps": "evaluation budget of the task",
    "summary": "one line about it",
    "seed_task_ids": "ids of the seed tasks",
    "instructions": "what to do",
    "nodes": "candidates in the tree",
    "by_status": "candidates by evaluation status ('pending' while evaluated)",
    "open_expansions": "expansions handed out and not yet answered",
    "best": "the task's best correct kernel so far",
    "max_depth": "depth of the deepest node",
    "steps_used": "evaluations used, open expansions included",
    "budget_left": "evaluations left in the task's budget; -1 = unlimited",
    "feedback": "the evaluator's feedback",
    "seq": "creation order within the task",
    "depth": "distance from the root",
    "children": "number of child nodes",
    "merge_id": "the merge's id (unmerge_rules takes it)",
}
"""Descriptions of fields that recur across tools, for the schemas (a field's own description wins)."""


def _describe(schema: dict[str, Any]) -> None:
    for name, prop in schema.get("properties", {}).items():
        prop.pop("title", None)  # "Node Id" for node_id says nothing; the description does
        if not prop.get("description") and name in GLOSSARY:
            prop["description"] = GLOSSARY[name]


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_describe)


class Edit(Out):
    """Replace the one occurrence of `old` in the parent's source with `new`."""

    old: str = Field(max_length=MAX_SOURCE_CHARS, description="exact text that occurs once in the parent's code")
    new: str = Field(max_length=MAX_SOURCE_CHARS, description="replacement text")


class SearchOverrides(Out):
    """Optional per-task search settings; an omitted one keeps the method's default."""

    max_steps: int | None = Field(None, ge=1, le=100_000, description="evaluation budget of the task (default 100)")
    c_explore: float | None = Field(None, ge=0, le=10, description="UCT exploration constant (default 0.3)")
    c_expand: float | None = Field(None, ge=0, le=10, description="widening constant (default 0.3; 0.15 for "
                                                                 "harder, model-level tasks)")
    p_large: float | None = Field(None, ge=0, le=1, description="chance of a large step when not forced "
                                                               "(default 0.2)")
    max_small_children: int | None = Field(None, ge=1, le=100, description="a node with this many small-step "
                                                                          "children (made or pending) gets a large "
                                                                          "step (default 2)")
    c_recent: int | None = Field(None, ge=1, le=50, description="small step: recent nodes of the branch shown "
                                                               "(default 5)")
    c_pool: int | None = Field(None, ge=1, le=50, description="large step: size of the pool of strong kernels "
                                                             "(default 5)")
    pool_topup: bool | None = Field(None, description="top up the large-step pool with strong kernels of other "
                                                      "branches (default false, as in the method's KernelBench "
                                                      "setup)")
    topup_temperature: float | None = Field(None, gt=0, le=100, description="softmax temperature over speedup "
                                                                           "for the top-up (default 1)")
    topup_geometric_p: float | None = Field(None, gt=0, le=1, description="parameter of the geometric count of "
                                                                         "top-up kernels (default 0.5)")
    q_max_blend: float | None = Field(None, ge=0, le=1, description="Q = (1-b)*mean + b*max of subtree rewards "
                                                                   "(default 0)")
    history_code_tokens: int | None = Field(None, ge=0, le=50_000, description="small step: code of the branch "
                                                                              "history within this many tokens "
                                                                              "(default 6000; 0 = none)")
    expansion_ttl_s: float | None = Field(None, ge=10, le=7 * 86400, description="seconds an unanswered "
                                                                                "expansion holds its place "
                                                                                "(default 900)")
    reward: str | None = Field(None, max_length=50, description="reward function: 'paper' (default) or "
                                                                "'log_speedup'")


class ProtocolOverrides(Out):
    """Optional per-task changes to the correctness and timing protocol."""

    correctness_trials: int | None = Field(None, ge=1, le=50)
    tolerance: Literal["default", "strict", "fp32", "loose"] | None = None
    warmup_runs: int | None = Field(None, ge=0, le=1000)
    timed_runs: int | None = Field(None, ge=1, le=10000)
    timed_budget_ms: float | None = Field(None, ge=0, le=60000, description=(
        "timed runs stop after about this long once 20 have run, at most timed_runs (default 100 ms; "
        "0: always timed_runs)"))
    timeout_s: float | None = Field(None, gt=0, le=600)


class Flag(Out):
    code: str
    message: str


class RegisterTaskResult(Out):
    task_id: str
    name: str
    existing: bool = Field(description="true when this exact reference was already registered")
    synthetic: bool = False
    root_node_id: str
    flags: list[Flag] = Field(description="problems found at validation; read them before optimizing")
    output_shapes: list[list[int]] = Field([], description="shapes of the reference's outputs")
    facts: TaskFacts | None = Field(None, description="inputs, outputs, tolerance and device (no code)")
    baseline_ms: float | None = Field(None, description="reference runtime; null without a GPU")
    baseline_note: str | None = None
    device: str
    max_steps: int


class TaskInfo(Out):
    task_id: str
    name: str
    nodes: int = Field(description="candidates evaluated or in flight")
    best_speedup: float | None
    flags: list[str]
    created_by: str
    synthetic: bool = Field(False, description="written by an agent from a synthesis brief")


class ListTasksResult(Out):
    tasks: list[TaskInfo]


class NodeBrief(Out):
    node_id: str
    parent_id: str | None
    action: str
    status: str = Field(description="an evaluation status, or 'pending' while it runs")
    speedup: float | None = None
    reward: float | None = None


class NodeInfo(NodeBrief):
    task_id: str
    seq: int
    depth: int
    children: int
    feedback: str | None
    runtime_ms: float | None = None
    created_by: str
    code: str | None = Field(None, description="the source, only with include_code=true")


class TreeSummary(Out):
    task_id: str
    name: str
    nodes: int
    by_status: dict[str, int]
    open_expansions: int
    best: NodeBrief | None
    max_depth: int
    steps_used: int
    budget_left: int
    tree: str = Field(description="compact text tree of the strongest nodes")


class ContextNode(Out):
    """A node shown to the agent as context."""

    node_id: str = Field(description="the node's id")
    action: str = Field(description="how it was made: 'root' (the reference), 'large' or 'small' step")
    status: str = Field(description="its evaluation status, or 'pending' while it runs")
    speedup: float | None = Field(None, description="reference time / kernel time; null when not timed")
    feedback: str | None = Field(None, description="the evaluator's feedback on it")
    code: str | None = Field(None, description="its source, when shown (within the context's size budget)")


class Sibling(Out):
    """A child already made from the chosen parent: do not repeat it."""

    node_id: str = Field(description="the sibling's id")
    action: str = Field(description="'small' or 'large' step")
    status: str = Field(description="its evaluation status, or 'pending' while it runs")
    speedup: float | None = Field(None, description="reference time / kernel time; null when not timed")
    summary: str = Field(description="the first line of its feedback after the status: the error, or how it "
                                     "passed")
    change: str = Field(description="what it changed against the parent: the first changed lines ('-' removed, "
                                    "'+' added), or 'rewritten' for a new kernel")


class TensorSpec(Out):
    """Shape and dtype of one tensor."""

    shape: list[int] | None = Field(description="dimensions; null when not a literal in the task source")
    dtype: str = Field(description="torch dtype name, e.g. 'float32'; 'unknown' when not read from the source")


class TaskFacts(Out):
    """What every kernel of the task must satisfy."""

    inputs: list[TensorSpec] = Field(description="forward() inputs as get_inputs() makes them, in order (read "
                                                 "from the task source at registration, not run)")
    outputs: list[TensorSpec] = Field(description="forward() outputs of the reference, in order")
    tolerance: str = Field(description="the correctness check every output must pass")
    device: str = Field(description="where candidates run: 'cpu' (Triton interpreter) or a CUDA device")
    parameters: str = Field(description="how ModelNew's weights are matched to Model's")
    reference_code: str | None = Field(None, description="the reference PyTorch module; given to large steps and "
                                                         "first kernels")


class ExpandResult(Out):
    """Everything needed to write the next kernel."""

    task_id: str = Field(description="the task")
    budget_exhausted: bool = Field(False, description="true when the task's step budget is used up; nothing else "
                                                      "is filled in then")
    expansion_id: str | None = Field(None, description="pass it to evaluate_kernel")
    expires_at: str | None = Field(None, description="when the expansion stops holding its place in the tree "
                                                     "(ISO 8601, UTC); evaluate_kernel still accepts it later")
    action: Literal["large", "small"] | None = Field(None, description="the step to take")
    instructions: str = Field(description="what to do in this step")
    task: TaskFacts | None = Field(None, description="inputs, outputs, tolerance and device of the task")
    parent: ContextNode | None = Field(None, description="small step: the node to refine, with code and feedback. "
                                                         "Large step: where the new kernel attaches (no code; "
                                                         "learn from the pool instead)")
    parent_profile: str | None = Field(None, description="small step: where the parent's time goes on the GPU "
                                                         "(profile_kernel's summary), when it was profiled")
    siblings: list[Sibling] = Field([], description="children already made from this parent (newest last): "
                                                    "try something else")
    history: list[ContextNode] = Field([], description="small step: the branch's recent nodes before the parent, "
                                                       "newest first (the parent is `parent`); code of the "
                                                       "newest within a size budget")
    pool: list[ContextNode] = Field([], description="large step: the best correct kernel of each segment on the "
                                                    "path from the root to the parent, with code (other branches' "
                                                    "only with the task's pool_topup); the instructions say what "
                                                    "it holds here")
    memory: str = Field("", description="skill memory: validity rules to follow")
    hardware: str = Field("", description="the device candidates run on")
    budget_left: int = Field(description="evaluations left in the task's budget after this one; -1 = unlimited")


class EvaluateResult(Out):
    task_id: str
    node_id: str
    parent_id: str | None
    status: str = Field(description="an evaluation status, or 'pending' (poll get_node)")
    duplicate: bool = Field(False, description="the same code was already evaluated; no new work was done")
    note: str | None = Field(None, description="for a duplicate: which node holds it and whether the expansion is "
                                               "still open for another kernel")
    feedback: str | None = None
    speedup: float | None = None
    reward: float | None = Field(None, description="the search's reward for this node. " + REWARD_TABLE)
    runtime_ms: float | None = None
    best: NodeBrief | None = Field(None, description="the task's best correct kernel so far")
    budget_left: int


class Candidate(NodeBrief):
    runtime_ms: float | None = None
    created_by: str
    triton_share: float | None = Field(None, description="share of its device time spent in its own Triton "
                                                         "kernels (0..1), once profile_kernel ran it on a GPU; "
                                                         "null when unknown")
    code: str | None = None


class KernelRow(Out):
    """One GPU kernel (or memcpy/memset) of a profiled forward."""

    name: str = Field(description="the kernel's name as the profiler reports it")
    triton: bool = Field(description="true for the candidate's own Triton kernels; false for PyTorch/cuBLAS/"
                                     "copies")
    calls_per_run: float = Field(description="launches per forward")
    ms_per_run: float = Field(description="device milliseconds per forward")
    share: float = Field(description="share of the forward's device time (0..1)")


class TritonKernelRow(Out):
    """What Triton reports about one compiled kernel of the candidate."""

    name: str = Field(description="the compiled kernel's name")
    n_regs: int | None = Field(None, description="registers per thread")
    n_spills: int | None = Field(None, description="registers spilled to local memory")
    shared_bytes: int | None = Field(None, description="shared memory per block, in bytes")
    num_warps: int | None = Field(None, description="warps per block")
    num_stages: int | None = Field(None, description="software pipelining stages")


class ProfileResult(Out):
    """Where a correct kernel's time goes, against the device's peaks and the task's floor."""

    node_id: str = Field(description="the profiled node")
    task_id: str = Field(description="its task")
    device: str = Field(description="where it was profiled: a CUDA device, or 'cpu' (nothing timed)")
    profiled: bool = Field(description="true when the per-kernel breakdown ran on a GPU")
    summary: str = Field(description="a few lines to act on; says why parts are missing when they are")
    candidate_ms: float | None = Field(None, description="the kernel's verified time per forward, in ms")
    device_ms_per_run: float | None = Field(None, description="sum of all kernel times per forward, in ms")
    triton_share: float | None = Field(None, description="share of device time in the candidate's Triton "
                                                         "kernels (0..1); low means PyTorch does the work")
    kernels: list[KernelRow] = Field([], description="time per launched kernel, slowest first")
    triton_kernels: list[TritonKernelRow] = Field([], description="registers, spills and occupancy inputs "
                                                                  "where Triton reports them")
    floor_bytes: int | None = Field(None, description="bytes the task must move at least (inputs, outputs, "
                                                      "parameters)")
    floor_flops: int | None = Field(None, description="matmul/conv/attention FLOPs of the reference")
    floor_ms: float | None = Field(None, description="the task's time floor on this device's measured peaks")
    vs_floor: float | None = Field(None, description="candidate time / floor time (1 = at the floor)")
    achieved_gbps: float | None = Field(None, description="floor bytes / candidate time, GB/s")
    bandwidth_fraction: float | None = Field(None, description="achieved bandwidth / the device's measured "
                                                               "copy bandwidth")
    achieved_tflops: float | None = Field(None, description="floor FLOPs / candidate time, TFLOP/s")
    flops_fraction: float | None = Field(None, description="achieved FLOP/s / the device's measured matmul "
                                                           "peak")
    notes: list[str] = Field([], description="caveats of the measurement")


class BestCandidatesResult(Out):
    task_id: str
    candidates: list[Candidate]
    note: str | None = Field(None, description="what the order does not say: set when kernels tie because "
                                               "none was timed")


class RuleInfo(Out):
    rule_id: int | str
    text: str
    count: int = 0
    active: bool = Field(True, description="confirmed: seen on at least `threshold` distinct tasks")
    status: Literal["confirmed", "unconfirmed"] = Field("confirmed", description="confirmed: seen on at least "
                                                        "`threshold` distinct tasks; unconfirmed: not yet")


class SignatureInfo(Out):
    signature: str = Field(description="the failures' normalized error message")
    count: int = Field(description="distinct tasks that failed this way")
    error_class: str
    example: str = Field(description="one raw message of the cluster (truncated)")


class WithheldRuleInfo(Out):
    rule_id: str
    text: str
    why: str = Field(description="why it is not served: contradicted by correct kernels, or retired")
    nodes: list[str] = Field([], description="the correct kernels (node ids) that used what it forbids")


class SkillMemoryResult(Out):
    rendered: str = Field(description="ready to paste into a prompt")
    rules: list[RuleInfo] = Field(description="the rules, ranked")
    withheld: list[WithheldRuleInfo] = Field(
        [], description="rules never served, with why; total_rules = rules + withheld + not_listed")
    not_listed: int = Field(0, description="unconfirmed rules left out, or past the list's limit")
    retrieval: str = Field("", description="how `closest` rules are found: embeddings and lexical, or lexical")
    available: bool = True
    threshold: int = Field(3, description="distinct tasks a rule needs to become active")
    total_rules: int = Field(0, description="all rules, including candidates, contradicted and retired ones")
    active_rules: int = 0
    candidate_rules: int = Field(0, description="rules seen on fewer occasions than the threshold")
    experiences: int = Field(0, description="failed evaluations recorded")
    frequent_signatures: list[SignatureInfo] = Field(
        [], description="with include_signatures: frequent failure signatures no rule explains yet")


class RuleDetail(Out):
    rule_id: str
    text: str
    count: int
    active: bool
    contradicted: bool
    retired: bool
    tasks: list[str] = Field(description="tasks it was seen on")
    who: list[str]
    members: list[str] = Field([], description="rules merged into this one (each keeps its wording and evidence)")


class MemoryDocument(Out):
    document: dict[str, Any] = Field(description="the export file (format adaexplore-skill-memory)")
    rules: int = Field(description="rules in the document")
    experiences: int = Field(description="failed evaluations in the document")


class ImportMemoryResult(Out):
    rules_added: int
    rules_merged: int
    evidence_added: int
    experiences_added: int
    contradictions_added: int


class OperatorInfo(Out):
    name: str
    signature: str = Field(description="its constructor's signature")
    summary: str = ""


class SynthesisResult(Out):
    seed_tasks: list[str] = Field(description="names of the seed tasks to mutate")
    seed_task_ids: list[str]
    operators: list[OperatorInfo] = Field(description="torch.nn operators to work in")
    instructions: str
    format_example: str = Field(description="the skeleton of a task file")


class CloseRuleInfo(Out):
    rule_id: str
    text: str
    count: int
    active: bool
    why: str = Field(description="what the two rules have in common")


class RecordFailureResult(Out):
    rule_id: int | str | None
    merged: bool
    merged_into_text: str | None = None
    count: int
    active: bool
    reason: str | None = None
    merged_rules: list[str] = Field([], description="every rule this call merged into rule_id")
    merge_ids: list[str] = Field([], description="the merges this call made (unmerge_rules undoes one)")
    link: str | None = Field(None, description="set when the failure given was not linked to the rule, and why")
    kept_apart_from: list[str] = Field([], description="the rules (distinct_from) now kept apart from this one")
    closest: list[CloseRuleInfo] = Field(
        [], description="up to 5 other stored rules closest to this one; if one says the same thing, call "
                        "record_failure again with the same rule and same_as=<its rule_id>")


class GroupMemberInfo(Out):
    rule_id: str
    text: str
    count: int
    active: bool
    why: str


class RuleGroup(Out):
    rules: list[GroupMemberInfo] = Field(description="the rules of the group")


class RuleGroupsResult(Out):
    groups: list[RuleGroup] = Field(description="groups of rules that look alike, largest first")
    total_rules: int


class MergeRulesResult(Out):
    merge_id: str = Field(description="pass it to unmerge_rules to undo this merge")
    rule_id: str = Field(description="the rule the others were merged into")
    members: list[str] = Field(description="the rules merged into it")
    text: str
    count: int
    active: bool


class KeepApartResult(Out):
    rules: list[RuleDetail] = Field(description="the rules now kept apart from one another")


class UnmergeResult(Out):
    merge_id: str
    rules: list[RuleDetail] = Field(description="the rule merged into, then the rules restored")


RegisterTaskResult.model_rebuild()
