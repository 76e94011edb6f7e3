"""Exact-match edits against a parent node's source (server process, before a candidate is stored)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class EditLike(Protocol):
    old: str
    new: str


class EditError(ValueError):
    """An edit that cannot be applied; the message names the edit and says how to fix it."""


def apply_edits(source: str, edits: Sequence[EditLike]) -> str:
    """Apply each edit in order; each `old` must occur exactly once in the current text."""
    text = source
    for i, edit in enumerate(edits):
        if not edit.old:
            raise EditError(f"edit {i}: 'old' is empty; give a snippet of the parent's code to replace")
        count = text.count(edit.old)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            fix = ("copy it exactly from the parent's code (get_node with include_code=true)" if count == 0
                   else "include more surrounding lines so it matches exactly once")
            raise EditError(f"edit {i}: 'old' {where} in the source (after the previous edits); {fix}")
        text = text.replace(edit.old, edit.new, 1)
    return text
