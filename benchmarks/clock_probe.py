"""Why a kernel's time differs between the field's timing loop and ours: both loops on the same
model in one process, after an idle GPU and after a hot one, with the SM clock, power and
clock-event reasons sampled by nvidia-smi beside them. GPU only; prints a markdown report.

    python benchmarks/clock_probe.py --problems .kb --field-harness .kbh [--task level2/12_Gemm_Multiply_LeakyReLU]
        [--candidate benchmarks/candidates/level2/12_Gemm_Multiply_LeakyReLU/v5_triton_gemm_128x128.py]

The field's loop is KernelBench's own `time_execution_with_cuda_event` (imported from the harness
folder): a device-wide synchronize before every run and a 256 MB tensor allocated and filled to
flush L2. Ours is `adaexplore.evaluator.worker.timing.time_on_gpu`: runs queued back to back after a
flush of a kept buffer, stopping after about 100 ms once 20 have run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch
from check_candidates import load  # benchmarks/ is on the path of a script run from it

REPO = Path(__file__).resolve().parents[1]


class Sampler:
    """nvidia-smi every 50 ms, each line stamped with this process's clock as it arrives."""

    FIELDS = ["clocks.sm", "clocks.mem", "power.draw", "temperature.gpu"]

    def __init__(self) -> None:
        self.rows: list[tuple[float, list[str]]] = []
        fields = list(self.FIELDS)
        for reason in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
            probe = subprocess.run(["nvidia-smi", f"--query-gpu={reason}", "--format=csv,noheader"],
                                   capture_output=True, text=True)
            if probe.returncode == 0:
                fields.append(reason)
                break
        self.fields = fields
        self.proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={','.join(fields)}",
                                      "--format=csv,noheader,nounits", "-lms", "50"],
                                     stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.rows.append((time.monotonic(), [c.strip() for c in line.split(",")]))

    def window(self, t0: float, t1: float) -> str:
        rows = [r for t, r in self.rows if t0 <= t <= t1]
        if not rows:
            return "no samples"

        def nums(i: int) -> list[float]:
            out = []
            for r in rows:
                try:
                    out.append(float(r[i]))
                except (ValueError, IndexError):
                    pass
            return out

        sm, power, temp = nums(0), nums(2), nums(3)
        reasons = sorted({r[4] for r in rows if len(r) > 4})
        return (f"SM MHz {min(sm):.0f}-{max(sm):.0f} (mean {statistics.fmean(sm):.0f}), "
                f"power W {min(power):.0f}-{max(power):.0f}, temp C {min(temp):.0f}-{max(temp):.0f}, "
                f"reasons {','.join(reasons) or '-'} ({len(rows)} samples)") if sm and power and temp else str(rows[:3])

    def close(self) -> None:
        self.proc.terminate()


def describe(ms: list[float]) -> str:
    s = sorted(ms)
    k = len(s) // 20
    trimmed = s[k:len(s) - k] if len(s) > 2 * k else s
    first, last = ms[:10], ms[-10:]
    return (f"n {len(ms)}, mean {statistics.fmean(ms):.4f}, trimmed {statistics.fmean(trimmed):.4f}, "
            f"median {statistics.median(ms):.4f}, min {s[0]:.4f}, max {s[-1]:.4f}, "
            f"first 10 {statistics.fmean(first):.4f}, last 10 {statistics.fmean(last):.4f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=Path, default=REPO / ".kb")
    ap.add_argument("--field-harness", type=Path, default=REPO / ".kbh", help="the folder holding harness/kernelbench")
    ap.add_argument("--task", default="level2/12_Gemm_Multiply_LeakyReLU")
    ap.add_argument("--candidate", type=Path,
                    default=REPO / "benchmarks/candidates/level2/12_Gemm_Multiply_LeakyReLU/v5_triton_gemm_128x128.py")
    ap.add_argument("--idle-s", type=float, default=4.0)
    ap.add_argument("--sustain-s", type=float, default=3.0)
    args = ap.parse_args()

    sys.path[:0] = [str(args.field_harness / "harness"), str(args.field_harness / "stubs")]
    from kernelbench import timing as field_timing

    from adaexplore.evaluator.worker.timing import time_on_gpu

    dev = torch.device("cuda:0")
    task = load(args.problems / f"{args.task}.py", "probe_task")
    cand = load(args.candidate, "probe_candidate")
    torch.manual_seed(42)
    init = task.get_init_inputs()
    torch.manual_seed(42)
    ref = task.Model(*init).to(dev)
    torch.manual_seed(42)
    new = cand.ModelNew(*init).to(dev)
    torch.manual_seed(42)
    inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
    with torch.no_grad():
        ref(*inputs), new(*inputs)
    torch.cuda.synchronize()

    sampler = Sampler()
    lines = [f"# Timing loops side by side: {args.task} (`{args.candidate.name}` as the candidate)", "",
             f"nvidia-smi fields: {', '.join(sampler.fields)}", ""]

    def field_loop(model) -> list[float]:
        with torch.no_grad():
            return field_timing.time_execution_with_cuda_event(model, inputs, num_warmup=3, num_trials=100,
                                                               verbose=False, device=dev)

    def our_loop(model) -> list[float]:
        with torch.no_grad():
            m = time_on_gpu(lambda i: model(*inputs), lambda i: None, warmup=10, runs=100, flush_l2=True,
                            device=dev, budget_ms=100.0, least=20)
        return m.event_ms

    def sustained(model, seconds: float) -> list[float]:
        out: list[float] = []
        end = time.monotonic() + seconds
        with torch.no_grad():
            while time.monotonic() < end:
                batch = []
                for _ in range(20):
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    model(*inputs)
                    e.record()
                    batch.append((s, e))
                torch.cuda.synchronize()
                out += [a.elapsed_time(b) for a, b in batch]
        return out

    def phase(label: str, loop, *loop_args) -> None:
        t0 = time.monotonic()
        ms = loop(*loop_args)
        t1 = time.monotonic()
        lines.append(f"- **{label}** ({t1 - t0:.2f} s): {describe(ms)}")
        if len(ms) >= 200:  # a long run: its mean in tenths, to see a clock settle
            n = len(ms) // 10
            lines.append("  - by tenths: " + ", ".join(f"{statistics.fmean(ms[i * n:(i + 1) * n]):.4f}"
                                                      for i in range(10)))
        lines.append(f"  - {sampler.window(t0, t1)}")

    def idle(label: str) -> None:
        t0 = time.monotonic()
        time.sleep(args.idle_s)
        lines.append(f"- idle {args.idle_s:.0f} s ({label}): {sampler.window(t0 + 1.0, time.monotonic())}")

    for name, model in (("reference", ref), ("candidate", new)):
        lines += ["", f"## {name}", ""]
        idle("cold")
        phase("field loop, from idle", field_loop, model)
        phase("our loop, right after", our_loop, model)
        idle("cold")
        phase("our loop, from idle", our_loop, model)
        phase("field loop, right after", field_loop, model)
        phase(f"back to back for {args.sustain_s:.0f} s", sustained, model, args.sustain_s)
        phase("field loop, hot", field_loop, model)
        phase("our loop, hot", our_loop, model)
        phase("field loop, hot again", field_loop, model)
        phase("our loop, hot again", our_loop, model)
    sampler.close()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
