"""Words the server says to agents: instructions, notes, the text tree (server process)."""

from __future__ import annotations

import difflib
from datetime import datetime, timezone
from typing import Any

from ...common.vocab import PENDING as PENDING_STATUS
from ...common.vocab import Action

SMALL = (
    "SMALL STEP: refine the parent kernel locally. Keep its structure; change one thing that the feedback "
    "and the branch history point at (fix the error it reports, tune block sizes or num_warps, fuse an "
    "adjacent op, vectorize a load, remove a redundant pass). Prefer `edits` against the parent's code. "
    "Pass expansion_id to evaluate_kernel.")
REPAIR = (
    " The parent failed ({status}): this step is its repair path. Fix what its feedback reports before "
    "changing anything else.")
LARGE = (
    "LARGE STEP: write a structurally different kernel for this task (another tiling, another fusion "
    "plan, another parallelization, another algorithm). {pool} Learn from the pool's kernels, do not copy them. "
    "Send the full source of a module that defines class ModelNew with "
    "the same constructor and forward signature as Model, with its Triton kernels inline. "
    "Pass expansion_id to evaluate_kernel.")
FIRST = (
    " The parent is the reference PyTorch module (the root): this is a first kernel for the task.")
BUDGET_EXHAUSTED = (
    "The step budget of this task is used up: no expansion was created. Call best_candidates for the "
    "results, or register the task again with a larger max_steps under a new name if more search is wanted.")
PENDING = ("still evaluating: call get_node with this node_id in a few seconds for the result")
INTERPRETER = (
    "Kernels run through Triton's interpreter on the CPU (TRITON_INTERPRET=1): correctness is checked, speed "
    "is not (speedup null; every correct kernel gets the same reward). The interpreter is not a GPU: libdevice "
    "(triton.language.extra.libdevice) does not run there, so use tl.* functions; tl.dot on bfloat16 operands "
    "multiplies their raw bits there (wrong by orders of magnitude), so give tl.dot float32 or float16 "
    "operands; interpreted kernels are slow, so keep grids modest.")
WEIGHTS = (
    "ModelNew(*get_init_inputs()) is built under the same seed as Model (torch.manual_seed({seed}) just "
    "before each constructor); nothing is copied from Model. Parameters and buffers created in the same order "
    "with the same shapes get the same values, so create them as Model's __init__ does (copying it works: "
    "the same nn.Linear, nn.LayerNorm, nn.Parameter calls, in order) and read them from self in forward.")


FINE = (None, "correct", "reference", PENDING_STATUS)
"""Parent statuses that need no repair (None: not known)."""


def instructions(action: str, parent_is_root: bool, parent_status: str | None = None, pool: str = "") -> str:
    """What to do in a step: a small step (a repair when its parent failed) or a large one, whose
    `pool` sentence says what the pool holds here."""
    if action == Action.small:
        text = SMALL + (REPAIR.format(status=parent_status) if parent_status not in FINE else "")
    else:
        text = LARGE.format(pool=pool)
    return text + (FIRST if parent_is_root else "")


def pool_sentence(size: int, c_pool: int, topup: bool, parent_is_root: bool, elsewhere: int) -> str:
    """What the pool of a large step holds, and why it is empty when it is. `elsewhere`: correct kernels
    of the tree that are not in it."""
    text = ("The pool holds the best correct kernel of each segment (a large step and the small steps that "
            f"refine it) on the path from the root to this step's parent, at most {c_pool}")
    text += (", topped up with strong kernels of other branches (pool_topup is on for this task)." if topup else
             "; kernels of other branches are left out (pool_topup is off for this task, as in the method), so "
             "that large steps explore on their own.")
    if size:
        return text + f" Here it holds {size}."
    why = "this step starts from the root, so its path holds no kernel" if parent_is_root else (
        "no kernel on this path is correct yet")
    if elsewhere and not topup:
        why += (f"; the {elsewhere} correct kernels elsewhere in the tree are left out" if elsewhere > 1 else
                "; the one correct kernel elsewhere in the tree is left out")
    return text + f" Here it is empty: {why}."


def first_finding(feedback: str | None) -> str:
    """The first line of a feedback that says more than its status (the error, the reason, the trials)."""
    lines = [ln.strip() for ln in (feedback or "").splitlines() if ln.strip()]
    said = [ln for ln in lines if not ln.startswith("status:")]
    return (said or lines or [""])[0]


def duplicate_note(node_id: str, expansion_id: str | None, still_open: bool) -> str:
    """What an evaluate_kernel call of code evaluated before did (nothing new) and what is left to do."""
    text = f"this code was evaluated before, as node {node_id}: its result is shown and no new node was made"
    if expansion_id and still_open:
        return text + f"; expansion {expansion_id} is still open: send a different kernel with it"
    if expansion_id:
        return text + f" (node {node_id} answered expansion {expansion_id})"
    return text


def tie_note(count: int, reward: float | None, device: str) -> str:
    """Why the order of correct kernels that were not timed says nothing about their speed."""
    at = f" at reward {reward:.3f}" if reward is not None else ""
    why = "this server has no GPU" if not device.startswith("cuda") else "their timings are missing"
    return (f"{count} kernels tie{at}: none of them was timed ({why}), so their order (oldest first) says "
            "nothing about which is faster")


def no_timing_note(device: str) -> str:
    if device.startswith("cuda"):
        return "the reference was not timed"
    return "no GPU on this server: kernels run in Triton's interpreter, so correctness is checked but not speed"


def hardware_facts(device: str) -> str:
    if not device.startswith("cuda"):
        return "CPU only. " + INTERPRETER
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
