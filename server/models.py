"""The contracts of every tool: typed inputs and outputs (these become the JSON schemas)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_SOURCE_CHARS = 256 * 1024
MAX_EDITS = 64
MAX_NAME_CHARS = 200
MAX_RULE_CHARS = 2000
MAX_EXCERPT_CHARS = 4000
MAX_ID_CHARS = 100

TaskId = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, description="a task id from register_task")]
NodeId = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, description="a node id (e.g. 'abc123-7')")]
Source = Annotated[str, Field(max_length=MAX_SOURCE_CHARS, description="full Python source (at most 256 KiB)")]


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Edit(Out):
    """Replace the one occurrence of `old` in the parent's source with `new`."""

    old: str = Field(max_length=MAX_SOURCE_CHARS, description="exact text that occurs once in the parent's code")
    new: str = Field(max_length=MAX_SOURCE_CHARS, description="replacement text")


class SearchOverrides(Out):
    """Optional per-task search settings (defaults follow the paper)."""

    max_steps: int | None = Field(None, ge=1, le=100_000, description="evaluation budget of the task")
    c_explore: float | None = Field(None, ge=0, le=10)
    c_expand: float | None = Field(None, ge=0, le=10)
    p_large: float | None = Field(None, ge=0, le=1)
    expansion_ttl_s: float | None = Field(None, ge=10, le=7 * 86400)
    reward: str | None = Field(None, max_length=50, description="name of the reward function")


class ProtocolOverrides(Out):
    """Optional per-task changes to the correctness and timing protocol."""

    correctness_trials: int | None = Field(None, ge=1, le=50)
    tolerance: Literal["default", "strict", "fp32", "loose"] | None = None
    warmup_runs: int | None = Field(None, ge=0, le=1000)
    timed_runs: int | None = Field(None, ge=1, le=10000)
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
    output_shapes: list[list[int]] = []
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
    node_id: str
    action: str
    status: str
    speedup: float | None = None
    feedback: str | None = None
    code: str | None = None


class ExpandResult(Out):
    task_id: str
    budget_exhausted: bool = False
    expansion_id: str | None = Field(None, description="pass it to evaluate_kernel")
    expires_at: float | None = None
    action: Literal["large", "small"] | None = None
    instructions: str
    parent: ContextNode | None = Field(None, description="the node to improve, with code and feedback")
    history: list[ContextNode] = Field([], description="small step: recent nodes of this branch")
    pool: list[ContextNode] = Field([], description="large step: strong kernels of the tree, with code")
    memory: str = Field("", description="skill memory: validity rules to follow")
    hardware: str = ""
    budget_left: int


class EvaluateResult(Out):
    task_id: str
    node_id: str
    parent_id: str | None
    status: str = Field(description="an evaluation status, or 'pending' (poll get_node)")
    duplicate: bool = Field(False, description="the same code was already evaluated; no new work was done")
    feedback: str | None = None
    speedup: float | None = None
    reward: float | None = None
    runtime_ms: float | None = None
    best: NodeBrief | None = Field(None, description="the task's best correct kernel so far")
    budget_left: int


class Candidate(NodeBrief):
    runtime_ms: float | None = None
    created_by: str
    code: str | None = None


class BestCandidatesResult(Out):
    task_id: str
    candidates: list[Candidate]


class RuleInfo(Out):
    rule_id: int | str
    text: str
    count: int = 0
    active: bool = Field(True, description="confirmed: seen on at least `threshold` distinct tasks")
    status: Literal["confirmed", "unconfirmed"] = "confirmed"


class SignatureInfo(Out):
    signature: str
    count: int = Field(description="distinct tasks that failed this way")
    error_class: str
    example: str = Field(description="one raw message of the cluster (truncated)")


class SkillMemoryResult(Out):
    rendered: str = Field(description="ready to paste into a prompt")
    rules: list[RuleInfo]
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
    rules: int
    experiences: int


class ImportMemoryResult(Out):
    rules_added: int
    rules_merged: int
    evidence_added: int
    experiences_added: int
    contradictions_added: int


class OperatorInfo(Out):
    name: str
    signature: str
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
    closest: list[CloseRuleInfo] = Field(
        [], description="up to 3 other stored rules closest to this one; if one says the same thing, call "
                        "record_failure again with the same rule and same_as=<its rule_id>")


class GroupMemberInfo(Out):
    rule_id: str
    text: str
    count: int
    active: bool
    why: str


class RuleGroup(Out):
    rules: list[GroupMemberInfo]


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


class UnmergeResult(Out):
    merge_id: str
    rules: list[RuleDetail] = Field(description="the rule merged into, then the rules restored")
