"""The benchmark's fixed mix of (task, candidate) pairs, and how to load them.

Task files mark their sizes with `# cpu-check: ...`; `shrink` swaps in those small sizes so
every pair can be checked through Triton's interpreter on a CPU.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TASKS = HERE / "tasks"
KERNELS = HERE / "kernels"

# (task, kernel, expected status)
PAIRS: list[tuple[str, str, str]] = [
    ("matmul", "matmul_tiled", "correct"),
    ("matmul", "matmul_ungrouped", "correct"),
    ("matmul", "matmul_autotune", "correct"),
    ("matmul", "matmul_slow", "correct"),
    ("matmul", "matmul_wrong", "wrong_output"),
    ("matmul", "matmul_compile_error", "compile_error"),
    ("rownorm", "rownorm_row", "correct"),
    ("rownorm", "rownorm_tile", "correct"),
    ("rownorm", "rownorm_autotune", "correct"),
    ("rownorm", "rownorm_slow", "correct"),
    ("rownorm", "rownorm_wrong", "wrong_output"),
    ("logsumexp", "lse_online", "correct"),
    ("logsumexp", "lse_two_pass", "correct"),
    ("logsumexp", "lse_runtime_error", "runtime_error"),
    ("softmax", "softmax_row", "correct"),
    ("softmax", "softmax_online", "correct"),
    ("softmax", "softmax_autotune", "correct"),
    ("softmax", "softmax_wrong", "wrong_output"),
    ("softmax", "softmax_compile_error", "compile_error"),
]

# A stratified subset for the cold mode under --quick: the mix's share of correct, wrong and
# non-compiling candidates, one autotuned kernel, every task.
QUICK_COLD = ["matmul_autotune", "rownorm_row", "lse_online", "softmax_row", "matmul_wrong",
              "softmax_compile_error"]

_SIZE = re.compile(r"^(?P<lhs>[A-Za-z_][\w, ]*)=\s*(?P<rhs>[^#]+?)\s*#\s*cpu-check:\s*(?P<small>.+?)\s*$")


def shrink(source: str) -> str:
    """Replace each `NAME = big  # cpu-check: small` line's value by the small one."""
    out = []
    for line in source.splitlines():
        m = _SIZE.match(line)
        out.append(f"{m.group('lhs').rstrip()} = {m.group('small')}" if m else line)
    return "\n".join(out) + "\n"


def task_source(name: str, small: bool = False) -> str:
    text = (TASKS / f"{name}.py").read_text()
    return shrink(text) if small else text


def kernel_source(name: str) -> str:
    return (KERNELS / f"{name}.py").read_text()


def materialize_tasks(folder: str | Path, small: bool) -> dict[str, Path]:
    """Write the (possibly shrunk) task files to `folder`; returns name -> path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in sorted({t for t, _, _ in PAIRS}):
        path = folder / f"{name}.py"
        path.write_text(task_source(name, small))
        paths[name] = path
    return paths


def ensure_importable() -> None:
    """Make `adaexplore.evaluator` importable here and in child processes, installed or not."""
    try:
        import adaexplore.evaluator  # noqa: F401

        return
    except ImportError:
        pass
    shim = Path(tempfile.mkdtemp(prefix="adaexplore-shim-"))
    pkg = shim / "adaexplore"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for sub in ("evaluator", "server", "skills", "search", "examples"):
        if (REPO / sub).is_dir():
            os.symlink(REPO / sub, pkg / sub)
    sys.path.insert(0, str(shim))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(shim), *filter(None, [os.environ.get("PYTHONPATH")])])
    for mod in [m for m in sys.modules if m == "adaexplore" or m.startswith("adaexplore.")]:
        del sys.modules[mod]
    import adaexplore.evaluator  # noqa: F401


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    """Percentile by linear interpolation (q in [0, 100])."""
    if not values:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
