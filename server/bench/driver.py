"""The loop of one task in one variant: ask the model, evaluate through the server, record (bench process).

One loop per agent; agents of a task share its step counter (and, for the tree, its tree: the server spreads
concurrent expansions). How each method picks what a step refines, with the public tools only:

- tree: expand_node picks the node and the step (large or small, UCT with widening); the kernel goes back with
  its expansion_id;
- chain: best_candidates(k=1) gives the best correct node, refined as a small step with parent_node_id; while
  none is correct, the last node of the chain is refined (the repair path), and the first step is a large step
  from the root;
- sample: every step is a large step from the root (evaluate_kernel without a parent), independent of the others.

With the memory on, the driver reads get_skill_memory once per task and, after a failure, asks the model for a
one-line rule and sends it with record_failure; when the server answers with `closest` rules, the model is asked
whether one says the same thing, and if so the rule is sent again with same_as. With the memory off, neither
tool is called and the memory section of expand_node's answer is not shown.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import anyio

from .endpoint import ChatEndpoint, EndpointError
from .extract import one_rule, python_block
from .prompts import RULE_REQUEST, SAME_REQUEST, chosen_message, expansion_message, system_prompt
from .session import ToolCallError, ToolSession
from .settings import Budget, Method
from .state import StepRecord, TaskRecord, VariantState

# Failures worth a rule: the kernel broke a rule of the language or the harness, not just its own arithmetic.
RULE_STATUSES = {"syntax_error", "import_error", "compile_error", "runtime_error", "cuda_error", "no_triton_kernel",
                 "shape_mismatch", "nan_output", "cheat_detected", "oom"}
_COMPILED = re.compile(r"\(([0-9.]+) ms compiled\)")


@dataclass
class Limits:
    """The invocation-wide budgets, shared by every loop, and why the run stopped early (if it did)."""

    budget: Budget
    started: float = field(default_factory=time.monotonic)
    tokens: int = 0
    stopped: str | None = None  # set once: every loop then ends after its current step
    failed: bool = False  # stopped by an error (the endpoint), not by a budget

    def spent(self) -> bool:
        """True once the run must stop: a budget is used up, or a loop stopped it."""
        if self.stopped is None:
            if self.budget.max_tokens is not None and self.tokens >= self.budget.max_tokens:
                self.stopped = f"the token budget of {self.budget.max_tokens} is used up"
            elif self.budget.max_seconds is not None and time.monotonic() - self.started >= self.budget.max_seconds:
                self.stopped = f"the time budget of {self.budget.max_seconds:.0f} s is used up"
        return self.stopped is not None

    def fail(self, why: str) -> None:
        if self.stopped is None:
            self.stopped, self.failed = why, True


def speedup_vs_compile(feedback: str | None, runtime_ms: float | None) -> float | None:
    """Speedup against torch.compile, from the evaluator's feedback line naming the compiled time."""
    m = _COMPILED.search(feedback or "")
    if not m or not runtime_ms:
        return None
    return float(m.group(1)) / runtime_ms


@dataclass
class TaskRun:
    """One task of one variant: its registration and the shared step counter of its agents."""

    name: str
    source: str
    reg: TaskRecord
    facts: dict[str, Any] | None
    system: str
    memory_text: str
    todo: list[int]  # step numbers not yet recorded (a resumed run fills the gaps a kill left)
    last_node: str | None = None
    lock: anyio.Lock = field(default_factory=anyio.Lock)


class Driver:
    """Runs the steps of one variant's tasks against one server and one endpoint."""

    def __init__(self, session: ToolSession, chat: ChatEndpoint, state: VariantState, method: Method, memory: bool,
                 limits: Limits, on_step: Any = None):
        self.s, self.chat, self.state, self.method, self.memory = session, chat, state, method, memory
        self.limits = limits
        self.on_step = on_step or (lambda variant, task, rec: None)

    async def register(self, name: str, source: str) -> tuple[TaskRecord, dict[str, Any] | None]:
        """Register the task (the same source gives back the task already there, with its tree)."""
        # The bench counts steps itself (every model answer is one); the server's own budget is set out of reach.
        r = await self.s.call("register_task", {"source": source, "name": name,
                                                "search": {"max_steps": 100_000}})
        rec = TaskRecord(task=name, task_id=r["task_id"], root_node_id=r["root_node_id"],
                         baseline_ms=r.get("baseline_ms"), device=r.get("device", ""),
                         flags=[f["code"] for f in r.get("flags", [])])
        self.state.add_task(rec)
        return rec, r.get("facts")

    async def run_task(self, name: str, source: str, agents: int) -> None:
        """Take this task's remaining steps with `agents` concurrent loops."""
        budget = self.limits.budget.steps
        if self.state.done(name) >= budget or self.limits.spent():
            return
        reg, facts = await self.register(name, source)
        optimize = await self.s.prompt("optimize", {"task_id": reg.task_id, "steps": str(budget)})
        memory_text = ""
        if self.memory:
            mem = await self.s.call("get_skill_memory", {"task_id": reg.task_id})
            memory_text = str(mem.get("rendered", ""))
        done = self.state.steps_of(name)
        run = TaskRun(name=name, source=source, reg=reg, facts=facts, system=system_prompt(optimize),
                      memory_text=memory_text,
                      todo=[k for k in range(1, budget + 1) if k not in {s.step for s in done}],
                      last_node=next((s.node_id for s in reversed(done) if s.node_id), None))
        async with anyio.create_task_group() as tg:
            for agent in range(agents):
                tg.start_soon(self._agent, run, agent)

    async def _agent(self, run: TaskRun, agent: int) -> None:
        while not self.limits.spent():
            async with run.lock:
                if not run.todo:
                    return
                step = run.todo.pop(0)
            try:
                rec = await self._step(run, step, agent)
            except EndpointError as exc:
                self.limits.fail(str(exc))  # this step is not recorded: a resumed run takes it again
                return
            if rec.node_id and rec.status != "duplicate":
                run.last_node = rec.node_id
            self.state.add_step(rec)
            self.on_step(self.state.variant, run.name, rec)

    async def _choose(self, run: TaskRun, step: int) -> tuple[str, dict[str, Any]]:
        """The user message of the next step and the evaluate_kernel arguments that place its kernel."""
        tid = run.reg.task_id
        if self.method is Method.tree:
            exp = await self.s.call("expand_node", {"task_id": tid})
            if exp.get("budget_exhausted"):
                raise ToolCallError("expand_node: the task's step budget on the server is used up")
            msg = expansion_message(run.name, step, self.limits.budget.steps, exp, self.memory, run.source)
            return msg, {"expansion_id": exp["expansion_id"], "_action": exp.get("action"),
                         "_parent": (exp.get("parent") or {}).get("node_id")}
        parent: dict[str, Any] | None = None
        if self.method is Method.chain:
            best = await self.s.call("best_candidates", {"task_id": tid, "k": 1})
            pick = best["candidates"][0]["node_id"] if best.get("candidates") else run.last_node
            if pick and pick != run.reg.root_node_id:
                parent = await self.s.call("get_node", {"node_id": pick, "include_code": True})
        msg = chosen_message(run.name, step, self.limits.budget.steps, parent, run.facts, run.source,
                             run.memory_text if self.memory else "")
        if parent:
            return msg, {"parent_node_id": parent["node_id"], "_action": "small", "_parent": parent["node_id"]}
        return msg, {"_action": "large", "_parent": run.reg.root_node_id}

    async def _step(self, run: TaskRun, step: int, agent: int) -> StepRecord:
        t0 = time.monotonic()
        base = {"task": run.name, "step": step, "agent": agent}
        try:
            user, place = await self._choose(run, step)
        except ToolCallError as exc:
            return StepRecord(**base, status="tool_error", wall_s=time.monotonic() - t0, feedback=str(exc)[:300])
        action, parent = place.pop("_action", None), place.pop("_parent", None)
        answer = await self.chat.ask(run.system, user)
        self.limits.tokens += answer.tokens
        tokens = answer.tokens
        code = python_block(answer.text)
        base.update(action=action, parent_id=parent)
        if code is None:
            return StepRecord(**base, status="no_code", tokens=tokens, wall_s=time.monotonic() - t0)
        try:
            r = await self.evaluate({"task_id": run.reg.task_id, "source": code, **place})
        except ToolCallError as exc:
            return StepRecord(**base, status="tool_error", tokens=tokens, wall_s=time.monotonic() - t0,
                              feedback=str(exc)[:300])
        status = "duplicate" if r.get("duplicate") else str(r.get("status"))
        if self.memory and status in RULE_STATUSES and r.get("feedback"):
            tokens += await self.record_rule(run.system, r["node_id"], str(r["feedback"]))
        return StepRecord(**base, status=status, node_id=r.get("node_id"), speedup=r.get("speedup"),
                          speedup_compile=speedup_vs_compile(r.get("feedback"), r.get("runtime_ms")),
                          runtime_ms=r.get("runtime_ms"), tokens=tokens, wall_s=time.monotonic() - t0)

    async def evaluate(self, args: dict[str, Any]) -> dict[str, Any]:
        """evaluate_kernel, then get_node until the verdict is in (past the server's wait limit it answers
        'pending')."""
        r = await self.s.call("evaluate_kernel", args)
        while r.get("status") == "pending":
            await anyio.sleep(1.0)
            r = await self.s.call("get_node", {"node_id": r["node_id"]})
        return r

    async def record_rule(self, system: str, node_id: str, feedback: str) -> int:
        """Ask the model for a rule explaining a failure and record it (step 5 of the optimize prompt); the
        tokens it took."""
        answer = await self.chat.ask(system, RULE_REQUEST.format(feedback=feedback[:2000]))
        self.limits.tokens += answer.tokens
        tokens = answer.tokens
        rule = one_rule(answer.text)
        if not rule or rule.lower().rstrip(".") == "none":
            return tokens
        try:
            got = await self.s.call("record_failure", {"rule": rule, "node_id": node_id})
            closest = [c for c in got.get("closest") or [] if c.get("rule_id")]
            if closest and not got.get("merged"):
                # The server proposes look-alikes; whether one says the same thing is the model's call.
                listing = "\n".join(f"- {c['rule_id']}: {c.get('text', '')} ({c.get('why', '')})" for c in closest)
                same = await self.chat.ask(system, SAME_REQUEST.format(rule=rule, closest=listing))
                self.limits.tokens += same.tokens
                tokens += same.tokens
                pick = next((c["rule_id"] for c in closest if str(c["rule_id"]) in same.text), None)
                if pick is not None:
                    await self.s.call("record_failure", {"rule": rule, "node_id": node_id, "same_as": str(pick)})
        except ToolCallError:
            pass  # a rule the server refuses (too long, malformed) costs the search nothing
        return tokens
