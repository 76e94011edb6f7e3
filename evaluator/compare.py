"""Output comparison, done in the trusted process (candidate code never sees it)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .results import Mismatch, Status, Tolerance


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


def compare_outputs(got: list[torch.Tensor], expected: list[torch.Tensor], tol: Tolerance,
                    trial: int = 0) -> Verdict:
    """Check candidate outputs against reference outputs elementwise.

    Shapes and dtypes must match exactly; NaN or inf where the reference is finite never passes.
    """
    if len(got) != len(expected):
        return Verdict(Status.shape_mismatch, f"returned {len(got)} outputs, expected {len(expected)}")
    for i, (g, e) in enumerate(zip(got, expected)):
        if tuple(g.shape) != tuple(e.shape):
            return Verdict(Status.shape_mismatch,
                           f"output {i} has shape {list(g.shape)}, expected {list(e.shape)}")
        if g.dtype != e.dtype:
            return Verdict(Status.wrong_output, f"output {i} has dtype {g.dtype}, expected {e.dtype}")
        if g.numel() == 0:
            continue
        if _all_close_fast(g, e, tol):
            continue
        g64 = g.to(torch.float64) if not g.is_complex() else g.to(torch.complex128)
        e64 = e.to(torch.float64) if not e.is_complex() else e.to(torch.complex128)
        bad_values = ~torch.isfinite(g64) & torch.isfinite(e64)
        if bool(bad_values.any()):
            idx = int(bad_values.reshape(-1).nonzero()[0])
            return Verdict(Status.nan_output, f"output {i} has NaN/inf where the reference is finite",
                           Mismatch(trial=trial, output_index=i, max_abs_error=float("inf"),
                                    max_rel_error=float("inf"), index=_unravel(idx, tuple(g.shape)),
                                    expected=float(e64.reshape(-1)[idx].real), got=float(g64.reshape(-1)[idx].real),
                                    mismatched_fraction=float(bad_values.float().mean())))
        both_nan = torch.isnan(g64) & torch.isnan(e64)
        diff = (g64 - e64).abs()
        diff = torch.where(both_nan, torch.zeros_like(diff), diff)
        same_inf = torch.isinf(g64) & (g64 == e64)
        diff = torch.where(same_inf, torch.zeros_like(diff), diff)
        limit = tol.atol + tol.rtol * e64.abs()
        bad = diff > limit
        if bool(bad.any()):
            flat_diff = torch.where(torch.isfinite(diff), diff, torch.full_like(diff, float("inf"))).reshape(-1)
            idx = int(torch.argmax(flat_diff))
            rel = (diff / e64.abs().clamp_min(1e-12)).reshape(-1)
            return Verdict(Status.wrong_output, f"output {i} differs from the reference",
                           Mismatch(trial=trial, output_index=i, max_abs_error=float(flat_diff[idx]),
                                    max_rel_error=float(rel.max()), index=_unravel(idx, tuple(g.shape)),
                                    expected=float(e64.reshape(-1)[idx].real), got=float(g64.reshape(-1)[idx].real),
                                    mismatched_fraction=float(bad.float().mean())))
    return Verdict(Status.correct)


_FAST_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _all_close_fast(g: torch.Tensor, e: torch.Tensor, tol: Tolerance) -> bool:
    """True when every element is finite and within tolerance, in a few passes.

    Large outputs that pass (the common case) skip the float64 path below, which builds a
    mismatch report; anything that fails here (including NaN anywhere) goes through it.
    """
    if g.dtype not in _FAST_DTYPES or g.numel() < (1 << 16):
        return False
    work = torch.float64 if g.dtype == torch.float64 else torch.float32
    gw, ew = g.to(work), e.to(work)
    diff = (gw - ew).abs_()
    limit = ew.abs().mul_(tol.rtol).add_(tol.atol)
    return bool((diff <= limit).all())


def zeros_pass(expected: list[torch.Tensor], tol: Tolerance) -> bool:
    """True when an all-zero output would pass the tolerance against these outputs."""
    return all(
        compare_outputs([torch.zeros_like(e)], [e], tol).status is Status.correct for e in expected
        if e.is_floating_point()) and any(e.is_floating_point() for e in expected)
