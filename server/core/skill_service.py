"""The skill memory joined with the tree: reading it for a task, briefs for new tasks, recording failure rules.

Runs in the server process. The memory itself is reached through SkillMemory; the tasks and nodes a
call names are read through the tree service. Raises the core's domain errors.
"""

from __future__ import annotations

import random

from .errors import InvalidRequest, NotFound
from .skill_memory import SkillMemory
from .tool_models import OperatorInfo, RecordFailureResult, RuleGroupsResult, SkillMemoryResult, SynthesisResult
from .tree_service import TreeService
from .tree_store import TreeStore


class SkillService:
    """Skill memory, task synthesis and failure rules."""

    def __init__(self, store: TreeStore, tree: TreeService, memory: SkillMemory):
        self.store = store
        self.tree = tree
        self.memory = memory

    def skill_memory(self, task_id: str | None, token_budget: int, include_candidates: bool,
                     include_signatures: bool = False) -> SkillMemoryResult:
        source = self.tree.task(task_id).source if task_id is not None else None
        return self.memory.view(source, token_budget, include_candidates, include_signatures)

    def synthesize(self, n_seeds: int, n_ops: int, seed: int | None) -> SynthesisResult:
        """A brief for writing one new task: seed tasks from the store and torch.nn operators to work in."""
        from ...skills import synthesis_brief

        rng = random.Random(seed) if seed is not None else random.Random()
        tasks = self.store.list_tasks()
        picked = rng.sample(tasks, k=min(n_seeds, len(tasks)))
        seeds = []
        for t in picked:
            row = self.store.get_task(t.id)
            if row is not None:
                seeds.append((t.id, row.name, row.source))
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
                       caller: str, same_as: str | None = None,
                       distinct_from: list[str] | None = None) -> RecordFailureResult:
        if not rule.strip():
            raise InvalidRequest("'rule' is empty; state the validity rule in one sentence (do X, not Y)")
        code = None
        if node_id is not None:
            node = self.store.get_node(node_id, with_source=True)
            if node is None:
                raise NotFound(f"unknown node_id {node_id!r}; omit it or pass a node of the failure")
            if task_id is not None and task_id != node.task_id:
                raise InvalidRequest(f"node {node_id} belongs to task {node.task_id}, not {task_id}")
            task_id = node.task_id
            if error_excerpt is None and node.feedback:
                error_excerpt = node.feedback[:500]
            code = node.source
        elif task_id is not None:
            self.tree.task(task_id)
        return self.memory.record_rule(rule.strip(), caller, task_id, node_id, error_excerpt, same_as=same_as,
                                       node_code=code, distinct_from=distinct_from)

    def rule_groups(self, limit: int) -> RuleGroupsResult:
        return self.memory.groups(limit)
