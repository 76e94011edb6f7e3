"""Output comparison, done in the trusted process (candidate code never sees it).

A comparison runs piece by piece over the flattened outputs (`OutputCheck`), so its working
memory is a few pieces, not a few copies of the output: an 8 GB output compared in float64
would otherwise need tens of gigabytes beside it. The judge feeds pieces as they arrive;
`compare_outputs` feeds whole tensors in pieces.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .results import Mismatch, Status, Tolerance

PIECE_ELEMENTS = 1 << 24  # float64 temporaries of one piece: 128 MB each


@dataclass
class Verdict:
    status: Status
    message: str = ""
    mismatch: Mismatch | None = None


def _unravel(flat_index: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for dim in reversed(shape):
        out.append(flat_index % dim if dim else 0)
        flat_index //= dim if dim else 1
    return list(reversed(out))


def compare_kinds(got: list[tuple[tuple[int, ...], torch.dtype]], expected: list[torch.Tensor]) -> Verdict | None:
    """The verdict decided by count, shapes and dtypes alone (None: the values decide)."""
    if len(got) != len(expected):
        return Verdict(Status.shape_mismatch, f"returned {len(got)} outputs, expected {len(expected)}")
    for i, ((shape, dtype), e) in enumerate(zip(got, expected)):
        if tuple(shape) != tuple(e.shape):
            return Verdict(Status.shape_mismatch, f"output {i} has shape {list(shape)}, expected {list(e.shape)}")
        if dtype != e.dtype:
            return Verdict(Status.wrong_output, f"output {i} has dtype {dtype}, expected {e.dtype}")
    return None


@dataclass
class _Worst:
    """What one output's pieces showed so far."""

    nonfinite: int = 0  # NaN/inf where the reference is finite
    nonfinite_at: tuple[int, float, float] | None = None  # (flat index, expected, got) of the first
    bad: int = 0  # out of tolerance
    max_abs: float = -1.0
    max_abs_at: tuple[int, float, float] | None = None
    max_rel: float = 0.0


class OutputCheck:
    """A comparison of candidate outputs with reference outputs of the same kinds, fed in pieces:
    `feed(i, start, piece)` with the flattened elements of output `i` from element `start`, in
    any order; `verdict()` once every element was fed (the caller counts them)."""

    def __init__(self, expected: list[torch.Tensor], tol: Tolerance, trial: int = 0) -> None:
        self.expected, self.tol, self.trial = expected, tol, trial
        self._worst = [_Worst() for _ in expected]

    def feed(self, index: int, start: int, piece: torch.Tensor) -> None:
        if not piece.numel():
            return
        e = self.expected[index].reshape(-1)[start:start + piece.numel()]
        if e.device != piece.device:
            e = e.to(piece.device)
        if _all_close_fast(piece, e, self.tol):
            return
        self._report(self._worst[index], start, piece, e)

    def _report(self, w: _Worst, start: int, g: torch.Tensor, e: torch.Tensor) -> None:
        wide = torch.complex128 if g.is_complex() else torch.float64
        g64, e64 = g.to(wide), e.to(wide)
        bad_values = ~torch.isfinite(g64) & torch.isfinite(e64)
        count = int(bad_values.sum())
        if count:
            idx = int(bad_values.nonzero()[0])
            if w.nonfinite_at is None or start + idx < w.nonfinite_at[0]:
                w.nonfinite_at = (start + idx, float(e64[idx].real), float(g64[idx].real))
            w.nonfinite += count
            return  # such an output is reported for its NaN/inf alone
        diff = (g64 - e64).abs()
        diff = torch.where(torch.isnan(g64) & torch.isnan(e64), torch.zeros_like(diff), diff)
        diff = torch.where(torch.isinf(g64) & (g64 == e64), torch.zeros_like(diff), diff)
        bad = diff > self.tol.atol + self.tol.rtol * e64.abs()
        w.bad += int(bad.sum())
        finite_diff = torch.where(torch.isfinite(diff), diff, torch.full_like(diff, float("inf")))
        idx = int(torch.argmax(finite_diff))
        worst = float(finite_diff[idx])
        if worst > w.max_abs or (worst == w.max_abs and w.max_abs_at is not None and start + idx < w.max_abs_at[0]):
            w.max_abs, w.max_abs_at = worst, (start + idx, float(e64[idx].real), float(g64[idx].real))
        w.max_rel = max(w.max_rel, float((diff / e64.abs().clamp_min(1e-12)).max()))

    def verdict(self) -> Verdict:
        for i, (w, e) in enumerate(zip(self._worst, self.expected)):
            numel, shape = max(e.numel(), 1), tuple(e.shape)
            if w.nonfinite and w.nonfinite_at is not None:
                at, want, got = w.nonfinite_at
                return Verdict(Status.nan_output, f"output {i} has NaN/inf where the reference is finite",
                               Mismatch(trial=self.trial, output_index=i, max_abs_error=float("inf"),
                                        max_rel_error=float("inf"), index=_unravel(at, shape), expected=want,
                                        got=got, mismatched_fraction=w.nonfinite / numel))
            if w.bad and w.max_abs_at is not None:
                at, want, got = w.max_abs_at
                return Verdict(Status.wrong_output, f"output {i} differs from the reference",
                               Mismatch(trial=self.trial, output_index=i, max_abs_error=w.max_abs,
                                        max_rel_error=w.max_rel, index=_unravel(at, shape), expected=want,
                                        got=got, mismatched_fraction=w.bad / numel))
        return Verdict(Status.correct)


def compare_outputs(got: list[torch.Tensor], expected: list[torch.Tensor], tol: Tolerance,
                    trial: int = 0, device: torch.device | None = None) -> Verdict:
    """Check candidate outputs against reference outputs elementwise (on `device`, a piece at a
    time, if given: tensors kept in host memory are compared on the GPU).

    Shapes and dtypes must match exactly; NaN or inf where the reference is finite never passes.
    """
    decided = compare_kinds([(tuple(g.shape), g.dtype) for g in got], expected)
    if decided is not None:
        return decided
    check = OutputCheck(expected, tol, trial)
    for i, g in enumerate(got):
        for start, piece in pieces(g, device):
            check.feed(i, start, piece)
    return check.verdict()


def pieces(t: torch.Tensor, device: torch.device | None = None):
    """(first element, piece) over the flattened tensor, PIECE_ELEMENTS at a time, each piece
    on `device` (where it is, if None)."""
    flat = t.reshape(-1)
    for start in range(0, flat.numel(), PIECE_ELEMENTS):
        piece = flat[start:start + PIECE_ELEMENTS]
        yield start, piece if device is None or piece.device == device else piece.to(device)


_FAST_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _all_close_fast(g: torch.Tensor, e: torch.Tensor, tol: Tolerance) -> bool:
    """True when every element is finite and within tolerance, in a few passes.

    Large pieces that pass (the common case) skip the float64 path, which builds a mismatch
    report; anything that fails here (including NaN anywhere) goes through it.
    """
    if g.dtype not in _FAST_DTYPES or g.numel() < (1 << 16):
        return False
    work = torch.float64 if g.dtype == torch.float64 else torch.float32
    gw, ew = g.to(work), e.to(work)
    diff = (gw - ew).abs_()
    limit = ew.abs().mul_(tol.rtol).add_(tol.atol)
    return bool((diff <= limit).all())


def zeros_pass(expected: list[torch.Tensor], tol: Tolerance, device: torch.device | None = None) -> bool:
    """True when an all-zero output would pass the tolerance against these outputs (checked a
    piece at a time, on `device` if given: no output-sized zeros are made)."""
    floats = [e for e in expected if e.is_floating_point()]
    for e in floats:
        check = OutputCheck([e], tol)
        for start, piece in pieces(e, device):
            check.feed(0, start, torch.zeros_like(piece))
        if check.verdict().status is not Status.correct:
            return False
    return bool(floats)
