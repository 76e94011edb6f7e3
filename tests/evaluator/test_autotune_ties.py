"""Identical copies of an autotuned kernel keep the same configuration, whichever process times it."""

import subprocess
import sys
import textwrap


def test_the_first_configuration_within_the_tie_of_the_fastest_is_kept():
    from adaexplore.evaluator.worker.autotune_ties import pick

    assert pick({"a": [1.015, 1.0, 1.1], "b": [1.0, 0.99, 1.02], "c": [1.6, 1.5, 1.7]}) == "a"
    assert pick({"a": [1.05, 1.0, 1.1], "b": [1.0, 0.99, 1.02]}) == "b"  # past the tie: the fastest


def test_nothing_is_picked_when_no_configuration_ran():
    from adaexplore.evaluator.worker.autotune_ties import pick

    inf = float("inf")
    assert pick({"a": [inf, inf, inf], "b": [inf, inf, inf]}) is None
    assert pick({}) is None


TUNED = textwrap.dedent('''
    import os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton, triton.language as tl
    from triton.runtime.autotuner import Autotuner

    # What each block size timed at, as do_bench reports it (median, 20th, 80th percentile).
    TIMED = {64: [1.012, 1.0, 1.03], 128: [1.0, 0.99, 1.01], 256: [1.4, 1.3, 1.5]}
    Autotuner._bench = lambda self, *args, config, **meta: TIMED[config.kwargs["BLOCK"]]
    if sys.argv[1] == "ties":
        from adaexplore.evaluator.worker import autotune_ties
        autotune_ties.install()

    @triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (64, 128, 256)], key=["n"])
    @triton.jit
    def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    x = torch.arange(300, dtype=torch.float32)
    for _ in range(2):
        y = torch.empty_like(x)
        double[lambda meta: (triton.cdiv(300, meta["BLOCK"]),)](x, y, 300)
        assert torch.equal(y, 2 * x)
    print(double.best_config.kwargs["BLOCK"])
''')


def _kept(tmp_path, mode: str) -> int:
    script = tmp_path / "tuned.py"
    script.write_text(TUNED)
    out = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


def test_a_kernel_whose_configurations_tie_keeps_the_first_listed_in_a_judged_process(tmp_path):
    assert _kept(tmp_path, "plain") == 128  # Triton alone keeps whichever timed faster by a hair
    assert _kept(tmp_path, "ties") == 64
