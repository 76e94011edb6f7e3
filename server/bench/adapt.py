"""The Adapt stage, when a bench asks for it (`--adapt-rounds`): the server's `adapt` prompt, followed by the
driver before the search (runs in the bench process).

Each round writes new tasks from synthesize_task briefs (the model writes the task, register_task(synthetic)
accepts it only if it runs), then one kernel per task in a single pass, and every failure worth a rule goes to
record_failure, so the search that follows starts with a skill memory. Its steps are logged apart from the
search's (adapt.jsonl) and count against no task's step budget, only against the token and time budgets.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .driver import RULE_STATUSES, Driver
from .extract import python_block
from .prompts import ANSWER_FORMAT, chosen_message
from .session import ToolCallError
from .state import StepRecord, append_line

TASK_REQUEST = """Write one new task from this brief.

{instructions}

Operators to work in: {operators}

The task file's shape:
```python
{example}
```

Answer with ONE fenced ```python block holding the whole task file (class Model, get_inputs, get_init_inputs)."""


async def adapt(driver: Driver, rounds: int, per_round: int, seed_tasks: list[Path]) -> int:
    """Run `rounds` rounds of `per_round` synthesized tasks; the number of rules recorded."""
    s, chat, limits = driver.s, driver.chat, driver.limits
    for f in seed_tasks:  # the brief's seeds are registered tasks
        await driver.register(f.stem, f.read_text())
    system = (await s.prompt("adapt", {"count": str(per_round)})).rstrip() + "\n" + ANSWER_FORMAT
    log = driver.state.dir / "adapt.jsonl"
    done = sum(1 for _ in log.open("rb")) if log.exists() else 0
    rules = 0
    for n in range(done, rounds * per_round):
        if limits.spent():
            break
        name = f"adapt-r{n // per_round + 1}-{n % per_round + 1}"
        t0 = time.monotonic()
        try:
            brief = await s.call("synthesize_task", {"seed": n})
        except ToolCallError as exc:
            limits.fail(f"the Adapt stage cannot go on: {exc}")
            break
        ops = ", ".join(f"{o['name']}{o.get('signature', '')}" for o in brief.get("operators", []))
        ask = TASK_REQUEST.format(instructions=brief.get("instructions", ""), operators=ops or "any",
                                  example=str(brief.get("format_example", "")).rstrip())
        tokens = 0
        reg: dict[str, Any] | None = None
        for _ in range(2):  # one retry, with the server's reason
            answer = await chat.ask(system, f"Task name: {name}\n\n{ask}")
            tokens += answer.tokens
            limits.tokens += answer.tokens
            source = python_block(answer.text)
            if source is None:
                break
            try:
                reg = await s.call("register_task", {"source": source, "name": name, "synthetic": True})
                break
            except ToolCallError as exc:
                ask += f"\n\nThe last task was rejected: {str(exc)[:800]}\nFix it and answer with the whole file."
        if reg is None:
            append_line(log, StepRecord(task=name, step=1, status="task_rejected", tokens=tokens,
                                 wall_s=time.monotonic() - t0))
            continue
        answer = await chat.ask(system, chosen_message(name, 1, 1, None, reg.get("facts"), source or "", ""))
        tokens += answer.tokens
        limits.tokens += answer.tokens
        code = python_block(answer.text)
        status, node = "no_code", None
        if code is not None:
            try:
                r = await driver.evaluate({"task_id": reg["task_id"], "source": code})
            except ToolCallError as exc:
                r = {"status": "tool_error", "feedback": str(exc)}
            status, node = str(r.get("status")), r.get("node_id")
            if status in RULE_STATUSES and r.get("feedback") and node:
                tokens += await driver.record_rule(system, node, str(r["feedback"]))
                rules += 1
        append_line(log, StepRecord(task=name, step=1, status=status, node_id=node, action="large", tokens=tokens,
                             wall_s=time.monotonic() - t0))
    return rules

