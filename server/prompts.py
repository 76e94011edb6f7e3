"""MCP prompts (slash commands in clients): the optimize loop and the adapt loop."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

OPTIMIZE = """You are optimizing a PyTorch module into fast, correct Triton kernels with the adaexplore tools.
{target}
Loop until the budget is used up or {steps} steps are done:
1. Call get_skill_memory(task_id) once at the start and follow its rules in every kernel you write.
2. Call expand_node(task_id). It returns an action with instructions, the parent kernel (code and
   feedback), and either the recent history of its branch (small step) or a pool of strong kernels
   (large step), plus hardware facts and an expansion_id.
3. Write the kernel: a module defining class ModelNew with Model's constructor and forward signature,
   with @triton.jit kernels inline and launched from forward. Small step: change one thing, preferably
   as `edits` against the parent's code. Large step: a structurally different design, full `source`.
4. Call evaluate_kernel(task_id, source or edits, expansion_id). A failure is a result: read its status
   and feedback; the next small step on that node is the repair path. If the status is 'pending',
   poll get_node(node_id) until it is done.
5. When a failure taught you something general (an API misuse, a constexpr rule, a dtype trap), call
   record_failure with a one-sentence rule and the node_id.
6. Repeat from 2. Never game the checks (no reuse of the reference, no caching outputs, no other streams).
At the end call best_candidates(task_id, include_code=true) and report the best kernel and its speedup."""

ADAPT = """You are building the team's skill memory for Triton kernel writing with the adaexplore tools.
1. Call get_skill_memory(include_candidates=true) to see known rules and candidates.
2. Take {count} small tasks (list_tasks; or write new ones: a module with class Model(nn.Module),
   get_inputs(), get_init_inputs(), mutated from a seed task by changing ops, shapes or dtypes, and
   register each with register_task; only tasks that validate are accepted).
3. For each task write one kernel in a single pass (no retries) and evaluate_kernel it.
4. For every failure, find the root cause in the feedback and call record_failure with a short, general
   rule ("do X, not Y") tied to the node_id. Equivalent rules are merged and counted; a rule becomes
   active once it is seen on 3 occasions.
5. Finish with get_skill_memory and summarize which rules became active."""


def register_prompts(mcp: MCPServer) -> None:
    @mcp.prompt(title="Optimize a task", description="the AdaExplore loop: memory, expand, write, evaluate, repeat")
    def optimize(task_id: str = "", steps: str = "20") -> str:
        target = (f"Task: {task_id}." if task_id else
                  "First pick a task with list_tasks, or register one with register_task.")
        return OPTIMIZE.format(target=target, steps=steps or "20")

    @mcp.prompt(title="Adapt the skill memory", description="attempt tasks and distill failures into rules")
    def adapt(count: str = "5") -> str:
        return ADAPT.format(count=count or "5")
