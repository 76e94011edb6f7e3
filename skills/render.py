"""Token-budgeted rendering of rules as a ready-to-paste markdown list."""

from __future__ import annotations

from collections.abc import Sequence

from .similarity import RuleView


def estimate_tokens(text: str) -> int:
    """A rough token count: four characters a token."""
    return (len(text) + 3) // 4


def render_rules(rules: Sequence[RuleView], token_budget: int = 1500,
                 title: str = "Validity rules learned from earlier failures (seen on N occasions):") -> str:
    """A numbered list within ``token_budget``; the last line says how many rules did not fit."""
    if not rules:
        return ""
    lines = [title]
    for i, rule in enumerate(rules):
        mark = "" if rule.active else ", candidate"
        entry = f"{i + 1}. {rule.text} (seen {rule.count}x{mark})"
        left = len(rules) - i - 1
        footer = f"({left} more rules left out to fit the token budget)" if left else ""
        footer_if_stopped = f"({len(rules) - i} more rules left out to fit the token budget)"
        candidate = "\n".join([*lines, entry, footer]).rstrip()
        if estimate_tokens(candidate) > token_budget:
            text = "\n".join([*lines, footer_if_stopped]) if len(lines) > 1 else ""
            return text if estimate_tokens(text) <= token_budget else ""
        lines.append(entry)
    return "\n".join(lines)
