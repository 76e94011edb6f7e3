"""What the driver tells the model, around the server's own `optimize` prompt (runs in the bench process).

The system message is the server's `optimize` prompt with a short note on the answer format: the driver calls
the tools for the model, so a model without tool calling only writes code. Each user message renders what the
step's tool answered (expand_node for the tree; the chosen node for chain and sample) as plain text.
"""

from __future__ import annotations

from typing import Any

ANSWER_FORMAT = """
This session's driver calls the tools for you and shows you what they returned. Answer each step with ONE
fenced ```python block holding the complete module (imports, @triton.jit kernels, class ModelNew); text
outside the block is ignored."""

RULE_REQUEST = """A kernel you wrote failed. Feedback of the evaluator:
{feedback}

If the failure teaches something general about writing Triton kernels (an API misuse, a constexpr rule, a dtype
trap), answer with ONE line: `Rule: <one sentence: do X, not Y>`. If it is only a mistake in this kernel's own
logic, answer `none`."""

SAME_REQUEST = """The memory holds rules close to the one you gave ("{rule}"):
{closest}

If one of them says the same thing (the same mistake with the same fix, in other words), answer with its rule_id
alone. If none does (they only look alike), answer `none`."""

SMALL_STEP = ("Small step: refine the parent kernel below. Change one thing (block sizes, fusion, memory access, a "
              "fix for its failure) and keep what works.")
LARGE_STEP = ("Large step: write a structurally new kernel for the reference module, not a variation of an "
              "existing one.")


def system_prompt(optimize: str) -> str:
    return optimize.rstrip() + "\n" + ANSWER_FORMAT


def _node(title: str, n: dict[str, Any] | None, code_chars: int = 12000) -> list[str]:
    if not n:
        return []
    head = f"## {title}: {n.get('node_id', '')} ({n.get('action', '')}, status {n.get('status', '?')}"
    if n.get("speedup") is not None:
        head += f", speedup {n['speedup']:.3f}x"
    out = [head + ")"]
    if n.get("feedback"):
        out.append("feedback:\n" + str(n["feedback"]))
    if n.get("code"):
        out.append("```python\n" + str(n["code"])[:code_chars].rstrip() + "\n```")
    return out


def _facts(facts: dict[str, Any] | None, reference: str | None) -> list[str]:
    out: list[str] = []
    if facts:
        ins = ", ".join(f"{t.get('dtype')}{t.get('shape')}" for t in facts.get("inputs", []))
        outs = ", ".join(f"{t.get('dtype')}{t.get('shape')}" for t in facts.get("outputs", []))
        out.append(f"## Task facts\ninputs: {ins}\noutputs: {outs}\ntolerance: {facts.get('tolerance', '')}\n"
                   f"device: {facts.get('device', '')}\nparameters: {facts.get('parameters', '')}")
    ref = (facts or {}).get("reference_code") or reference
    if ref:
        out.append("## Reference module (class Model)\n```python\n" + ref.rstrip() + "\n```")
    return out


def _head(task: str, step: int, budget: int) -> str:
    return f"Task name: {task}\nStep {step} of {budget}"


def expansion_message(task: str, step: int, budget: int, exp: dict[str, Any], memory: bool,
                      reference: str | None) -> str:
    """The user message of a tree step: what expand_node returned."""
    parts = [_head(task, step, budget), f"# Step: {exp.get('action')}", str(exp.get("instructions", ""))]
    parts += _facts(exp.get("task"), reference if exp.get("action") == "large" else None)
    parts += _node("Parent kernel", exp.get("parent"))
    if exp.get("parent_profile"):
        parts.append("## Parent's profile\n" + str(exp["parent_profile"]))
    for h in exp.get("history") or []:
        parts += _node("Earlier on this branch", h, code_chars=4000)
    for p in exp.get("pool") or []:
        parts += _node("Strong kernel from the tree", p, code_chars=8000)
    sib = exp.get("siblings") or []
    if sib:
        parts.append("## Already tried from this parent\n" + "\n".join(
            f"- {s.get('status')}: {s.get('summary', '')} | {s.get('change', '')}" for s in sib))
    if memory and exp.get("memory"):
        parts.append("## Skill memory (rules to follow)\n" + str(exp["memory"]))
    if exp.get("hardware"):
        parts.append("## Hardware\n" + str(exp["hardware"]))
    return "\n\n".join(p for p in parts if p)


def chosen_message(task: str, step: int, budget: int, parent: dict[str, Any] | None, facts: dict[str, Any] | None,
                   reference: str, memory_text: str) -> str:
    """The user message of a chain or sample step: a small step from `parent`, or a large step from the root."""
    parts = [_head(task, step, budget), f"# Step: {'small' if parent else 'large'}", SMALL_STEP if parent else LARGE_STEP]
    parts += _facts(facts, reference)
    parts += _node("Parent kernel", parent)
    if memory_text:
        parts.append("## Skill memory (rules to follow)\n" + memory_text)
    return "\n\n".join(p for p in parts if p)
