"""A candidate in plain PyTorch gets `no_triton_kernel` from its source alone, and only when that is certain."""

from __future__ import annotations

import glob
import textwrap
from pathlib import Path

import pytest

from adaexplore.evaluator.lint import check_candidate, static_verdict
from adaexplore.evaluator.results import Status

ROOT = Path(__file__).resolve().parents[2]

PLAIN = textwrap.dedent("""
    import math
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class ModelNew(nn.Module):
        def forward(self, x):
            return F.gelu(x) * math.sqrt(2.0)
""")


def with_line(line: str) -> str:
    return PLAIN.replace("        return", f"        {line}\n        return")


def test_a_plain_pytorch_candidate_is_told_at_once_that_no_triton_kernel_can_run():
    got = static_verdict(PLAIN)
    assert got is not None and got.status is Status.no_triton_kernel
    assert got.error is not None and got.error.error_class == "NoTritonKernel" and "@triton.jit" in got.error.hint


@pytest.mark.parametrize("uncertain", [
    "import triton",                                   # a kernel may follow
    "model = torch.compile(self)",                     # inductor writes Triton kernels
    "torch._inductor.config.max_autotune = True",
    "m = __import__('tri' + 'ton')",                   # imports hidden from the reader
    "m = getattr(torch, 'comp' + 'ile')",
    "exec(open('k.py').read())",
    "src = '@triton.jit'",                              # a kernel built from text
    "y = torch.ops.mylib.fused(x)",                     # a custom op may launch Triton
])
def test_anything_that_could_reach_triton_is_left_to_the_run(uncertain):
    got = static_verdict(with_line(uncertain))
    assert got is None or got.status is not Status.no_triton_kernel


@pytest.mark.parametrize("imports", ["from liger_kernel.ops import rms_norm", "import mylib", "from . import helper"])
def test_a_candidate_importing_other_modules_is_left_to_the_run(imports):
    got = static_verdict(imports + "\n" + PLAIN)
    assert got is None or got.status is not Status.no_triton_kernel


def test_no_honest_kernel_of_the_project_is_taken_for_plain_pytorch():
    files = [Path(f) for pattern in ("examples/kernels/**/*.py", "benchmarks/candidates/level*/**/*.py",
                                     "tests/bench/replay/**/*.py")
             for f in glob.glob(str(ROOT / pattern), recursive=True)]
    assert len(files) > 50
    taken = [f.name for f in files if check_candidate(f.read_text()).status is Status.no_triton_kernel]
    assert taken == []


def test_the_exploit_without_a_kernel_is_caught_statically():
    source = (ROOT / "tests" / "exploits" / "e01_no_kernel.py").read_text()
    assert check_candidate(source).status is Status.no_triton_kernel
    decorative = (ROOT / "tests" / "exploits" / "e01b_decorative_kernel.py").read_text()
    assert check_candidate(decorative).status is not Status.no_triton_kernel  # its kernel must be seen idle
