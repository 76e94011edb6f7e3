"""Reading a model's plain-text answer: the Python module in it, or a one-line rule (runs in the bench process).

Many endpoints and small local models have no tool calling, so the driver asks for a fenced Python block and
takes the last complete one that defines ModelNew (answers often show a snippet before the whole module).
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.S | re.I)


def python_block(text: str) -> str | None:
    """The module in an answer: the last fenced block defining ModelNew, else the last fenced block, else the
    whole answer when it is itself a module defining ModelNew; None when there is no code."""
    blocks = [b.strip("\n") for b in _FENCE.findall(text)]
    with_model = [b for b in blocks if "ModelNew" in b]
    if with_model:
        return with_model[-1] + "\n"
    if blocks:
        return blocks[-1] + "\n"
    if "class ModelNew" in text:
        return text.strip("\n") + "\n"
    return None


def one_rule(text: str, limit: int = 400) -> str | None:
    """The first non-empty line of an answer that is not code, as a rule (None when there is none)."""
    body = _FENCE.sub("", text)
    for line in body.splitlines():
        line = line.strip().lstrip("-*> ").strip()
        if line.lower().startswith("rule:"):
            line = line[5:].strip()
        if len(line) >= 8:
            return line[:limit]
    return None
