"""Checks every candidate in benchmarks/candidates against its KernelBench task on the CPU.

Runs in one process on any machine, through Triton's interpreter (run as a script, it sets
TRITON_INTERPRET=1 before Triton is imported). Each task module is imported and shrunk: its
module-level sizes (integers of 32 or more, and tuples of them) are replaced by small ones, the
same small value for the same original, so shapes that agree at full size still agree. Reference and candidate
are built under the same seed, as both harnesses build them, and compared on fresh seeded
inputs with our evaluator's default tolerance; the field's fp32 tolerance (1e-4) is reported
alongside.

    python benchmarks/check_candidates.py [--problems DIR] [--only SUBSTRING] [--trials N] [--exponent E]

Prints one line per candidate; exits 1 if any candidate fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
CANDIDATES = HERE / "candidates"
DEFAULT_PROBLEMS = HERE.parent.parent / "shared" / "kernelbench" / "problems"
FIELD_FP32_TOL = 1e-4


EXPONENT = 0.4  # 8192 -> 37, 1024 -> 16, 128 -> 7


def small(value: int, exponent: float = EXPONENT) -> int:
    """A small stand-in for a size: monotone in the original, so equal sizes stay equal."""
    return value if value < 32 else max(4, round(value ** exponent))


def shrink(module, exponent: float = EXPONENT) -> dict:
    """Replace the module's size constants in place; returns what changed."""
    changed = {}
    for name, value in list(vars(module).items()):
        if name.startswith("_"):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value >= 32:
            new = small(value, exponent)
        elif isinstance(value, tuple) and value and all(isinstance(v, int) for v in value):
            new = tuple(small(v, exponent) for v in value)
        else:
            continue
        if new != value:
            setattr(module, name, new)
            changed[name] = new
    # Group normalization needs whole groups: channels stay a multiple of the (unshrunk) group count.
    groups = next((g for g in (getattr(module, n, None) for n in ("groups", "num_groups")) if isinstance(g, int)), None)
    channels = getattr(module, "out_channels", None)
    if groups and groups > 0 and isinstance(channels, int) and channels % groups:
        module.out_channels = changed["out_channels"] = groups * math.ceil(channels / groups)
        for name, value in list(changed.items()):  # shapes made from the channel count follow it (scale_shape)
            if isinstance(value, tuple) and value and value[0] == channels:
                setattr(module, name, (module.out_channels, *value[1:]))
                changed[name] = (module.out_channels, *value[1:])
    return changed


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def candidate_files(root: Path = CANDIDATES) -> list[Path]:
    """Every candidate: benchmarks/candidates/level<N>/<task stem>/<variant>.py."""
    return sorted(p for p in root.glob("level*/*/*.py") if not p.name.startswith("_"))


def task_file(candidate: Path, problems: Path) -> Path:
    return problems / candidate.parent.parent.name / f"{candidate.parent.name}.py"


def check(candidate: Path, problems: Path, trials: int, atol: float, rtol: float, exponent: float = EXPONENT) -> dict:
    import torch

    task = load(task_file(candidate, problems), f"task_{candidate.parent.name}")
    sizes = shrink(task, exponent)
    cand = load(candidate, f"cand_{candidate.parent.name}_{candidate.stem}")
    torch.manual_seed(42)
    init = task.get_init_inputs()
    torch.manual_seed(42)
    ref_model = task.Model(*init)
    torch.manual_seed(42)
    new_model = cand.ModelNew(*init)
    worst_abs = worst_rel = 0.0
    ok = field_ok = True
    with torch.no_grad():
        for trial in range(trials):
            torch.manual_seed(1000 + trial)
            inputs = task.get_inputs()
            expected = ref_model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
            got = new_model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
            if got.shape != expected.shape:
                return {"ok": False, "note": f"shape {tuple(got.shape)} != {tuple(expected.shape)}", "sizes": sizes}
            diff = (got.double() - expected.double()).abs()
            worst_abs = max(worst_abs, float(diff.max()))
            worst_rel = max(worst_rel, float((diff / expected.double().abs().clamp_min(1e-12)).max()))
            ok &= bool(torch.allclose(got, expected, atol=atol, rtol=rtol)) and not bool(torch.isnan(got).any())
            field_ok &= bool(torch.allclose(got, expected, atol=FIELD_FP32_TOL, rtol=FIELD_FP32_TOL))
    return {"ok": ok, "field_fp32_ok": field_ok, "max_abs": worst_abs, "max_rel": worst_rel, "sizes": sizes,
            "shape": tuple(expected.shape)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=Path, default=DEFAULT_PROBLEMS)
    ap.add_argument("--only", default="", help="check only candidates whose path contains this")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--exponent", type=float, default=EXPONENT,
                    help="a size s >= 32 becomes round(s ** exponent); 0.55 gives several tiles per kernel")
    args = ap.parse_args()

    # Before anything imports Triton: the candidates' kernels then run on the CPU.
    os.environ["TRITON_INTERPRET"] = "1"
    from adaexplore.evaluator.results import EvalProtocol

    tol = EvalProtocol().tolerance
    failures = 0
    files = [p for p in candidate_files() if args.only in str(p)]
    for path in files:
        t0 = time.monotonic()
        try:
            row = check(path, args.problems, args.trials, tol.atol, tol.rtol, args.exponent)
        except Exception as exc:  # noqa: BLE001 - one broken candidate must not hide the others
            row = {"ok": False, "note": f"{type(exc).__name__}: {exc}"[:300]}
            traceback.print_exc(file=sys.stderr)
        failures += not row["ok"]
        detail = row.get("note") or (f"out {row['shape']}, max abs {row['max_abs']:.2e}, max rel "
                                     f"{row['max_rel'] if math.isfinite(row['max_rel']) else float('nan'):.2e}, "
                                     f"field fp32 1e-4: {'pass' if row['field_fp32_ok'] else 'FAIL'}")
        print(f"{'PASS' if row['ok'] else 'FAIL'} {path.relative_to(CANDIDATES)} ({time.monotonic() - t0:.1f} s): "
              f"{detail}", flush=True)
    print(f"{len(files) - failures}/{len(files)} candidates correct at atol={tol.atol}, rtol={tol.rtol} "
          "(task sizes shrunk, Triton interpreter)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
