"""The GPU profile of three KernelBench level-2 kernels, as an agent would get it from `profile_kernel`.

Runs on a GPU machine. For each of three kernels it evaluates the candidate (it must be correct,
or a cheat caught only after its outputs matched), then profiles it with the evaluator's own
`profile` and reports: time per launched kernel, Triton or not; the Triton share of device time;
the per-kernel times summed per forward against the measured runtime; achieved bandwidth and
FLOP/s against the device's peaks and the distance to the task's floor.

The three kernels span the Triton share:
- a pass-through (the task's own PyTorch forward, its output copied by a Triton kernel): small;
- cuBLAS for the matmul with the whole epilogue fused into one Triton kernel: partial;
- an all-Triton kernel (the GEMM and its epilogue in one Triton kernel): near 100%.

    python benchmarks/profile_level2.py --problems PATH/problems/level2 [--json-out F] [--markdown F]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelbench_suite import PASS_THROUGH  # noqa: E402  (the task's forward, outputs copied by Triton)

# Linear by cuBLAS, then bias, subtract, multiply and ReLU in one Triton pass.
CUBLAS_AND_EPILOGUE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _epilogue(y, bias, out, n_rows, n_cols, sub, mul, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_rows * n_cols
    v = tl.load(y + offs, mask=mask) + tl.load(bias + offs % n_cols, mask=mask)
    v = (v - sub) * mul
    tl.store(out + offs, tl.maximum(v, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = subtract_value
        self.multiply_value = multiply_value

    def forward(self, x):
        y = torch.mm(x, self.linear.weight.t())
        out = torch.empty_like(y)
        n_rows, n_cols = y.shape
        _epilogue[(triton.cdiv(y.numel(), 1024),)](y, self.linear.bias, out, n_rows, n_cols,
                                                     self.subtract_value, self.multiply_value, BLOCK=1024)
        return out
'''

# The GEMM (tf32 tensor cores, fp32 accumulation), bias, multiply and LeakyReLU in one Triton kernel.
ALL_TRITON = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm_leaky(x, w, bias, out, M, N, K, multiplier, slope,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = pid // (GROUP * grid_n)
    first_m = group * GROUP
    rows_in_group = min(grid_m - first_m, GROUP)
    pid_m = first_m + (pid % (GROUP * grid_n)) % rows_in_group
    pid_n = (pid % (GROUP * grid_n)) // rows_in_group
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(x + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        # w is (N, K): read a (BK, BN) tile of its transpose
        b = tl.load(w + rn[None, :] * K + (k + rk)[:, None], mask=(rn[None, :] < N) & ((k + rk)[:, None] < K), other=0.0)
        acc = tl.dot(a, b, acc)
    acc = (acc + tl.load(bias + rn, mask=rn < N, other=0.0)[None, :]) * multiplier
    acc = tl.where(acc > 0, acc, acc * slope)
    tl.store(out + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.gemm.weight.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
        _gemm_leaky[grid](x, self.gemm.weight, self.gemm.bias, out, M, N, K, self.multiplier, self.negative_slope,
                          BM=128, BN=128, BK=32, GROUP=8, num_warps=8, num_stages=3)
        return out
'''

KERNELS = [
    ("76_Gemm_Add_ReLU.py", "pass-through (PyTorch forward, Triton copy)", None),
    ("9_Matmul_Subtract_Multiply_ReLU.py", "cuBLAS matmul, fused Triton epilogue", CUBLAS_AND_EPILOGUE),
    ("12_Gemm_Multiply_LeakyReLU.py", "all-Triton GEMM with fused epilogue", ALL_TRITON),
]


def profile_one(ev, problems: Path, name: str, what: str, source: str | None) -> dict:
    from adaexplore.evaluator.task import load_task_file

    task = load_task_file(problems / name)
    candidate = task.source + PASS_THROUGH if source is None else source
    result = ev.evaluate(task, candidate)
    row = {"task": name, "kernel": what, "verdict": result.status.value,
           "runtime_ms": result.timing.mean_ms if result.timing else None,
           "detail": (result.cheat_reason or (result.error.message if result.error else ""))[:300]}
    report = ev.profile(task, candidate)
    kernel_ms = sum(k.ms_per_run for k in report.kernels) if report.kernels else None
    row.update(profiled=report.profiled, candidate_ms=report.candidate_ms, device_ms_per_run=report.device_ms_per_run,
               kernel_sum_ms=kernel_ms, triton_share=report.triton_share,
               sum_vs_runtime=(report.device_ms_per_run / report.candidate_ms
                               if report.device_ms_per_run and report.candidate_ms else None),
               achieved_gbps=report.achieved_gbps, achieved_tflops=report.achieved_tflops,
               vs_floor=report.vs_floor, bound=report.bound, summary=report.summary,
               kernels=[k.model_dump(mode="json") for k in report.kernels][:8],
               triton_kernels=[t.model_dump(mode="json") for t in report.triton_kernels][:4],
               error=report.error.model_dump(mode="json") if report.error else None)
    return row


def markdown(rows: list[dict]) -> str:
    out = ["| task | kernel | verdict | runtime ms | sum of kernels ms/run | sum / runtime | Triton share |"
           " achieved | vs floor |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['sum_vs_runtime']:.3f}" if r.get("sum_vs_runtime") else "-"
        share = f"{100 * r['triton_share']:.1f}%" if r.get("triton_share") is not None else "-"
        ach = (f"{r['achieved_tflops']:.1f} TFLOP/s, {r['achieved_gbps']:.0f} GB/s"
               if r.get("achieved_tflops") is not None and r.get("achieved_gbps") is not None else "-")
        floor = f"{r['vs_floor']:.2f}x" if r.get("vs_floor") else "-"
        runtime = r.get("candidate_ms") or r.get("runtime_ms")
        out.append(f"| `{r['task']}` | {r['kernel']} | {r['verdict']} | {runtime or 0:.4f} | "
                   f"{r.get('device_ms_per_run') or 0:.4f} | {ratio} | {share} | {ach} | {floor} |")
    out.append("")
    for r in rows:
        out.append(f"`{r['task']}` ({r['kernel']}): {r['summary']}")
        for k in r["kernels"]:
            out.append(f"  - {k.get('name')}: {k.get('ms_per_run', 0):.4f} ms/run"
                       f"{' (Triton)' if k.get('triton') else ''}")
        for t in r["triton_kernels"]:
            out.append(f"  - Triton `{t.get('name')}`: registers {t.get('n_regs')}, spills {t.get('n_spills')}, "
                       f"shared {t.get('shared_bytes')} B, warps {t.get('num_warps')}, stages {t.get('num_stages')}")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=Path, required=True, help="KernelBench's level2 folder")
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args()

    from adaexplore.evaluator.evaluator import Evaluator

    ev = Evaluator()
    try:
        rows = []
        for name, what, source in KERNELS:
            row = profile_one(ev, args.problems, name, what, source)
            print(json.dumps({k: v for k, v in row.items() if k not in ("kernels", "triton_kernels")})[:600],
                  file=sys.stderr, flush=True)
            rows.append(row)
    finally:
        ev.close()
    text = markdown(rows)
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, indent=1))
    if args.markdown:
        args.markdown.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
