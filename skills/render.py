"""Token-budgeted rendering of served rules as a ready-to-paste markdown list.

Runs in the process that serves the memory (the server, or the ``adaexplore memory`` command).
Confirmed rules come first under their own header; unconfirmed ones (seen on fewer distinct
tasks than the threshold) follow under a header that says so, each marked ``unconfirmed``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .similarity import RuleView


def estimate_tokens(text: str) -> int:
    """A rough token count: four characters a token."""
    return (len(text) + 3) // 4


def headers(threshold: int) -> tuple[str, str]:
    """The header of the confirmed rules and the header of the unconfirmed ones."""
    return (f"Validity rules learned from earlier failures (confirmed: each seen on at least {threshold} "
            f"distinct tasks):",
            f"Unconfirmed rules (seen on fewer than {threshold} distinct tasks so far; follow them unless your "
            f"code shows they do not apply):")


def _entry(i: int, rule: RuleView) -> str:
    times = "1 task" if rule.count == 1 else f"{rule.count} tasks"
    mark = f"seen on {times}" if rule.active else f"unconfirmed, seen on {times}"
    return f"{i}. {rule.text} ({mark})"


def render_rules(rules: Sequence[RuleView], token_budget: int = 1500, threshold: int = 3) -> str:
    """A numbered list within ``token_budget``; the last line says how many rules did not fit."""
    if not rules:
        return ""
    confirmed_header, unconfirmed_header = headers(threshold)
    lines: list[str] = []
    fitted = 0
    for i, rule in enumerate(rules):
        new = []
        if i == 0 and rule.active:
            new.append(confirmed_header)
        if not rule.active and (i == 0 or rules[i - 1].active):
            new.append(unconfirmed_header)
        new.append(_entry(i + 1, rule))
        left = len(rules) - i - 1
        footer = [f"({left} more rules left out to fit the token budget)"] if left else []
        if estimate_tokens("\n".join([*lines, *new, *footer])) > token_budget:
            break
        lines += new
        fitted += 1
    if fitted < len(rules):
        if not fitted:
            return ""
        lines.append(f"({len(rules) - fitted} more rules left out to fit the token budget)")
        while lines and estimate_tokens("\n".join(lines)) > token_budget:  # the footer itself did not fit
            lines.pop(-2)
            fitted -= 1
            lines[-1] = f"({len(rules) - fitted} more rules left out to fit the token budget)"
            if fitted <= 0:
                return ""
    return "\n".join(lines)
