"""MCP prompts (slash commands in clients): the optimize loop, the adapt loop and the distill pass.

Runs in the server process; each prompt is a text with the tools to call, in order.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

OPTIMIZE = """You are optimizing a PyTorch module into fast, correct Triton kernels with the adaexplore tools.
{target}
Loop until the budget is used up or {steps} steps are done:
1. Call get_skill_memory(task_id) once at the start and follow its rules in every kernel you write.
2. Call expand_node(task_id). The search picks the node and the step (often another node than your
   last one). It returns an action with instructions, the parent kernel (code and feedback), and either
   the recent history of its branch (small step) or the pool of kernels on its path (large step; the
   instructions say what the pool holds and why it is empty when it is), plus the task's facts (how
   ModelNew's weights match Model's), hardware facts and an expansion_id.
3. Write the kernel: a module defining class ModelNew with Model's constructor and forward signature,
   with @triton.jit kernels inline and launched from forward. Small step: change one thing, preferably
   as `edits` against the parent's code. Large step: a structurally different design, full `source`.
4. Call evaluate_kernel(task_id, source or edits, expansion_id). A failure is a result: read its status
   and feedback. To repair it at once, call evaluate_kernel(task_id, edits or source,
   parent_node_id=<the failed node_id>) without an expansion_id: that is the repair path, a small step
   from the failed node. duplicate=true means that code was evaluated before: its result is shown, and
   the expansion is still open for a different kernel. If the status is 'pending', poll
   get_node(node_id) until it is done.
5. When a failure taught you something general (an API misuse, a constexpr rule, a dtype trap), call
   record_failure with a one-sentence rule (its cause and fix, not only the symptom) and the node_id. If its
   answer lists a `closest` rule that says the same thing in other words, call it again with
   same_as=<that rule_id>.
6. Repeat from 2. Never game the checks (no reuse of the reference, no caching outputs, no other streams).
At the end call best_candidates(task_id, include_code=true) and report the best kernel and its speedup."""

ADAPT = """You are building the team's skill memory for Triton kernel writing with the adaexplore tools.
The memory holds short validity rules distilled from failed kernels; a rule is served to every agent once it
has been seen on enough distinct tasks. Work in rounds of {count} tasks:
1. Call get_skill_memory(include_candidates=true, include_signatures=true). Note the counts (active_rules,
   candidate_rules, experiences) and read the rules, the candidates, and the frequent failure signatures that
   no rule explains yet.
2. Get tasks: call synthesize_task() for a brief (seed tasks and torch.nn operators to work in), write one new
   task from it (class Model(nn.Module), get_inputs(), get_init_inputs()), and register it with
   register_task(source=..., name=..., synthetic=true). A synthesized task is accepted only if it loads, runs
   and is not degenerate; if it is rejected, fix it from the message and register again. Repeat until the
   round has {count} tasks (list_tasks shows them, marked synthetic).
3. For each task, write ONE kernel in a single pass (no retries, no peeking at other kernels) and call
   evaluate_kernel(task_id, source). Poll get_node(node_id) while the status is 'pending'.
4. For every failed kernel, find the root cause in the feedback and call record_failure(rule=..., node_id=...)
   with one short, general sentence: "do X, not Y", naming the API involved (e.g. "Do not call
   tl.float32(x); use x.to(tl.float32)"). Name the cause and the fix, not only the symptom: "garbage past
   element 1000" is found again half as often as "mask loads and stores when n is not a multiple of BLOCK".
   Skip failures that are plain numerical mismatches of your own logic.
   The same wording, or the same error with the same fix, is merged by itself and counted once per task. If
   the answer lists `closest` rules and one of them says the same thing, call record_failure again with
   same_as=<its rule_id>; if they only look alike, pass their ids as distinct_from instead.
5. Call get_skill_memory(include_candidates=true) again and compare the counts with the previous round.
   Start another round (from step 2, with new tasks) while new rules keep appearing or candidates keep
   gaining occasions; stop when a round adds no new rule and activates no candidate: the memory has stopped
   growing.
6. Finish with get_skill_memory and summarize which rules became active and which candidates are close."""


DISTILL = """You are deduplicating the team's skill memory (the distill pass) with the adaexplore tools.
Rules are written by many agents in many words; the memory is only useful if one mistake is one rule.
1. Call list_rule_groups(limit={limit}). Each group holds stored rules that look alike, with why.
2. For each group, decide which rules say the SAME thing: the same mistake with the same fix, in other words.
   Look-alike is not enough. Keep apart rules about different mistakes on the same API (tl.dot operand
   sizes vs tl.dot operand dtypes; a missing load mask vs a mask of the wrong shape; the fill value of a
   masked max vs the start value of a running max).
3. For each set of rules that are one, call merge_rules(rule_ids=[...], reason="...") with a short reason;
   pass into=<rule_id> to keep the clearest wording. Every member keeps its evidence and counts.
4. For rules of a group that differ, call keep_rules_apart(rule_ids=[...]): no group or proposal pairs them
   again. If a merge was wrong, call unmerge_rules(merge_id) with the merge_id it returned.
5. Call list_rule_groups again and repeat until no group is left, or only groups you could not judge.
6. Finish with get_skill_memory and report the merges you made (merge ids, rules) and the groups you left."""


def register_prompts(mcp: MCPServer) -> None:
    @mcp.prompt(title="Optimize a task", description="the AdaExplore loop: memory, expand, write, evaluate, repeat")
    def optimize(task_id: str = "", steps: str = "20") -> str:
        target = (f"Task: {task_id}." if task_id else
                  "First pick a task with list_tasks, or register one with register_task.")
        return OPTIMIZE.format(target=target, steps=steps or "20")

    @mcp.prompt(title="Adapt the skill memory", description="attempt tasks and distill failures into rules")
    def adapt(count: str = "5") -> str:
        return ADAPT.format(count=count or "5")

    @mcp.prompt(title="Distill the skill memory", description="merge rules that say the same thing, keep the rest apart")
    def distill(limit: str = "20") -> str:
        return DISTILL.format(limit=limit or "20")

    for prompt in mcp._prompt_manager.list_prompts():  # the SDK takes no argument descriptions from a str default
        for arg in prompt.arguments or []:
            arg.description = PROMPT_ARGUMENTS[prompt.name][arg.name]


PROMPT_ARGUMENTS = {
    "optimize": {"task_id": "the task to optimize (from list_tasks or register_task); empty: pick or register one",
                 "steps": "how many kernels to evaluate before stopping (default 20)"},
    "adapt": {"count": "how many tasks to attempt (default 5)"},
    "distill": {"limit": "at most this many groups of look-alike rules to review (default 20)"},
}
"""What each prompt argument means, as clients show it."""
