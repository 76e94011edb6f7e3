"""Hints for failures that only show at run time, read from the candidate's source (never run).

Runs in the trusted evaluator and server processes after a verdict. ``nan_hint`` explains a ``nan_output``:
the usual cause is memory a kernel reads before anything wrote it (``torch.empty`` for an accumulation
buffer), else masked loads whose ``other`` poisons a reduction. ``runtime_hint`` names the fix for the
failures Triton reports without one: a ``tl.arange`` whose range is not a power of two, a ``tl.libdevice``
that moved, and a wrong output from ``tl.dot`` on bfloat16 operands under Triton's interpreter, which
multiplies their raw bits.
"""

from __future__ import annotations

import re

from ..results import EvalResult, Status
from .names import moved_libdevice_hint

_EMPTY = re.compile(r"\btorch\s*\.\s*empty(?:_like)?\s*\(|\.new_empty\s*\(")
_DOT = re.compile(r"\.\s*dot\s*\(")
_BF16 = re.compile(r"\bbfloat16\b|\bbf16\b")
_ARANGE_RANGE = re.compile(r"arange's range must be a power of 2(?:.*?a range of (\d+))?")
_OLD_LIBDEVICE = re.compile(r"triton\.language'? has no attribute 'libdevice'|triton\.language\.libdevice")

INTERPRETER_BF16_DOT = (
    "this kernel calls tl.dot where bfloat16 values appear, and Triton's interpreter (this server has no GPU) "
    "multiplies bfloat16 tl.dot operands as raw 16-bit integers: such a product is wrong here by orders of "
    "magnitude however right the kernel is. To be checked here, give tl.dot float32 or float16 operands "
    "(a.to(tl.float32)); on a GPU bfloat16 operands are fine")


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


def bf16_dot(source: str, task_source: str) -> bool:
    """Whether the candidate calls a dot where bfloat16 values appear (in it or in the task's inputs)."""
    return bool(_DOT.search(source)) and bool(_BF16.search(source) or _BF16.search(task_source))


def runtime_hint(result: EvalResult, source: str, task_source: str, interpreted: bool) -> str | None:
    """The fix for a failure seen when the candidate ran, where Triton's message names none; None if
    there is nothing to add. `interpreted`: the candidate ran in Triton's interpreter."""
    message = result.error.message if result.error else ""
    arange = _ARANGE_RANGE.search(message)
    if arange:
        size = int(arange.group(1)) if arange.group(1) else 0
        block = f"{1 << (size - 1).bit_length()} for a range of {size}" if size > 1 else "triton.next_power_of_2(n)"
        return (f"make the block a power of two ({block}; triton.next_power_of_2(n) on the host) and mask the "
                "lanes past n: offs = tl.arange(0, BLOCK); mask = offs < n")
    if _OLD_LIBDEVICE.search(message):
        return moved_libdevice_hint(None, interpreted)
    if interpreted and result.status in (Status.wrong_output, Status.nan_output) and bf16_dot(source, task_source):
        return INTERPRETER_BF16_DOT
    return None
