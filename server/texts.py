"""Words the server says to agents: instructions, notes, the text tree."""

from __future__ import annotations

import difflib
from datetime import datetime, timezone
from typing import Any

from ..common.vocab import PENDING as PENDING_STATUS
from ..common.vocab import Action

SMALL = (
    "SMALL STEP: refine the parent kernel locally. Keep its structure; change one thing that the feedback "
    "and the branch history point at (fix the error it reports, tune block sizes or num_warps, fuse an "
    "adjacent op, vectorize a load, remove a redundant pass). Prefer `edits` against the parent's code. "
    "Pass expansion_id to evaluate_kernel.")
LARGE = (
    "LARGE STEP: write a structurally different kernel for this task (another tiling, another fusion "
    "plan, another parallelization, another algorithm). The pool holds the strongest kernels found so far: "
    "learn from them, do not copy them. Send the full source of a module that defines class ModelNew with "
    "the same constructor and forward signature as Model, with its Triton kernels inline. "
    "Pass expansion_id to evaluate_kernel.")
FIRST = (
    " The parent is the reference PyTorch module (the root): this is a first kernel for the task.")
BUDGET_EXHAUSTED = (
    "The step budget of this task is used up: no expansion was created. Call best_candidates for the "
    "results, or register the task again with a larger max_steps under a new name if more search is wanted.")
PENDING = ("still evaluating: call get_node with this node_id in a few seconds for the result")


def instructions(action: str, parent_is_root: bool) -> str:
    text = SMALL if action == Action.small else LARGE
    return text + (FIRST if parent_is_root else "")


def no_timing_note(device: str) -> str:
    if device.startswith("cuda"):
        return "the reference was not timed"
    return "no GPU on this server: kernels run in Triton's interpreter, so correctness is checked but not speed"


def hardware_facts(device: str) -> str:
    if not device.startswith("cuda"):
        return ("CPU only: kernels run through Triton's interpreter (TRITON_INTERPRET=1). Correctness is checked; "
                "timing and speedup are not measured (null). Interpreted kernels are slow: keep grids modest.")
    try:
        import torch

        idx = int(device.split(":")[1]) if ":" in device else 0
        p = torch.cuda.get_device_properties(idx)
        cc = f"{p.major}.{p.minor}"
        return (f"GPU {p.name} (compute capability {cc}), {p.multi_processor_count} SMs, "
                f"{p.total_memory / 2**30:.0f} GiB memory; torch {torch.__version__}")
    except Exception:
        return f"GPU {device}"


def _fmt(r: Any) -> str:
    status = PENDING_STATUS if r.status is None else r.status
    sp = f" {r.speedup:.2f}x" if r.speedup is not None and r.action != Action.root else ""
    rw = f" r={r.reward:.2f}" if r.reward is not None else ""
    return f"{r.id} [{r.action}] {status}{sp}{rw}"


def text_tree(entry: Any, top: int) -> str:
    """The `top` best nodes by reward with their ancestors, as an indented tree."""
    rows = entry.rows
    scored = sorted((r for r in entry.ordered if r.action != Action.root and r.reward is not None),
                    key=lambda r: (-(r.reward or 0), r.seq))[:max(0, top)]
    keep: set[str] = set()
    for r in scored:
        cur: str | None = r.id
        while cur is not None and cur not in keep:
            keep.add(cur)
            cur = rows[cur].parent_id
    root = entry.ordered[0] if entry.ordered else None
    if root is None:
        return ""
    keep.add(root.id)
    kids: dict[str, list[str]] = {}
    for r in entry.ordered:
        if r.id in keep and r.parent_id is not None:
            kids.setdefault(r.parent_id, []).append(r.id)
    lines: list[str] = []
    stack = [(root.id, 0)]
    while stack and len(lines) < 60:
        nid, d = stack.pop()
        extra = entry.children.get(nid, 0) - len(kids.get(nid, []))
        more = f" (+{extra} more)" if extra > 0 else ""
        lines.append("  " * d + _fmt(rows[nid]) + more)
        for c in reversed(kids.get(nid, [])):
            stack.append((c, d + 1))
    return "\n".join(lines)


def iso_utc(epoch: float | None) -> str | None:
    """An epoch time as ISO 8601 in UTC, to the second (e.g. '2026-01-02T03:04:05Z')."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def change_summary(parent: str | None, child: str, max_lines: int = 6, width: int = 100) -> str:
    """What ``child`` changed against ``parent`` in a few lines: the first changed lines, '-' removed and
    '+' added, stripped of indentation; 'rewritten' when most of it is new (or there is no parent code)."""
    if not parent:
        return "rewritten (a new kernel)"
    a, b = parent.splitlines(), child.splitlines()
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if sm.ratio() < 0.5:
        return "rewritten (a structurally different kernel)"
    lines: list[str] = []
    total = 0
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        for ln in a[i1:i2]:
            total += 1
            if ln.strip():
                lines.append("- " + ln.strip()[:width])
        for ln in b[j1:j2]:
            total += 1
            if ln.strip():
                lines.append("+ " + ln.strip()[:width])
    if not lines:
        return "no change in code lines (whitespace or comments only)"
    more = len(lines) - max_lines
    return " | ".join(lines[:max_lines]) + (f" | ... ({more} more changed lines)" if more > 0 else "")
