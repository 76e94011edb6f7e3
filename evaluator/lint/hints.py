"""Hints for failures that only show at run time, read from the candidate's source (never run).

Runs in the trusted server process after a verdict. ``nan_hint`` explains a ``nan_output``: the usual
cause is memory a kernel reads before anything wrote it (``torch.empty`` for an accumulation buffer),
else masked loads whose ``other`` poisons a reduction.
"""

from __future__ import annotations

import re

_EMPTY = re.compile(r"\btorch\s*\.\s*empty(?:_like)?\s*\(|\.new_empty\s*\(")


def nan_hint(source: str) -> str:
    """What to check when the output holds NaN: masked lanes always; uninitialized memory when the
    candidate allocates with torch.empty."""
    masked = ("masked lanes: an `other` of -inf or a padded lane that reaches a max, sum, exp or division "
              "gives inf - inf or 0/0; keep the mask in the reduction or use a safe `other` (0.0 for a sum)")
    if _EMPTY.search(source):
        return ("NaN usually comes from memory read before it was written: torch.empty / empty_like are "
                "uninitialized, so a buffer a kernel accumulates into (tl.atomic_add, +=) must start from "
                "torch.zeros, and the grid and masks must write every output element; or from " + masked)
    return "NaN usually comes from " + masked + "; or from a division by zero, or the log or sqrt of a negative"
