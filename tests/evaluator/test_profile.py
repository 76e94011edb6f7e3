"""Profiling: the task floor, the report's derived numbers and summary, the CPU path, the GPU path."""

from types import SimpleNamespace

import pytest
import torch
from conftest import EXAMPLES, HAS_CUDA, example_task, gpu

from adaexplore.evaluator.profile import (
    DevicePeaks,
    KernelCapture,
    PeaksCache,
    ProfileReport,
    TritonKernelInfo,
    build_report,
    device_rows,
    floor_ms,
    flops_peak,
    is_triton_kernel,
    jit_function_names,
    kernel_breakdown,
    peaks_key,
    plausible_peaks,
    short_kernel_name,
    summarize_profile,
    task_floor,
)
from adaexplore.evaluator.results import ErrorInfo, EvalProtocol, to_json
from adaexplore.evaluator.worker import harness

H200_LIKE = DevicePeaks(device_name="NVIDIA H200", torch_version="2.11.0", copy_gbps=4300.0,
                        bf16_tflops=750.0, fp32_tflops=50.0, tf32_tflops=380.0)


def _floor(name: str) -> dict:
    task = harness.load_task((EXAMPLES / "tasks" / f"{name}.py").read_text())
    return task_floor(task, EvalProtocol(), torch.device("cpu"))


# --- the floor -------------------------------------------------------------------------------------

def test_matmul_floor_counts_2mnk_flops_and_every_tensor_once():
    floor = _floor("matmul_bias_relu")
    m, k, n = 128, 256, 128
    assert abs(floor["flops"] - 2 * m * n * k) <= 0.05 * 2 * m * n * k
    # x, W, b, out in fp32
    assert floor["bytes"] == 4 * (m * k + n * k + n + m * n)
    assert floor["input_bytes"] == 4 * m * k and floor["output_bytes"] == 4 * m * n
    assert floor["param_bytes"] == 4 * (n * k + n)
    assert floor["dtype"] == "float32"


def test_conv_floor_counts_the_convolution():
    floor = _floor("conv_bias_relu")
    batch, cin, cout, hw, ks = 2, 8, 16, 16, 3
    expected = 2 * batch * cout * hw * hw * cin * ks * ks
    assert abs(floor["flops"] - expected) <= 0.05 * expected
    params = cout * cin * ks * ks + cout + cout
    assert floor["bytes"] == 4 * (batch * cin * hw * hw + params + batch * cout * hw * hw)


@pytest.mark.parametrize("name", ["softmax", "gelu_scale", "rmsnorm", "fused_add_mul"])
def test_elementwise_and_reduction_floors_are_bytes_only(name):
    floor = _floor(name)
    assert floor["flops"] == 0
    assert floor["bytes"] >= floor["input_bytes"] + floor["output_bytes"] > 0


def test_floor_ms_takes_the_larger_term():
    # 4.3 MB at 4300 GB/s = 1 us; 0 FLOPs -> memory-bound
    ms, bound = floor_ms(4_300_000, 0, 4300.0, 380.0)
    assert bound == "memory" and ms == pytest.approx(1e-3)
    # 2*8192^3 FLOPs at 750 TFLOP/s dominates 400 MB
    ms, bound = floor_ms(400_000_000, 2 * 8192 ** 3, 4300.0, 750.0)
    assert bound == "compute" and ms == pytest.approx(2 * 8192 ** 3 / 750e12 * 1e3)
    assert floor_ms(1000, 10, None, None) == (None, None)
    assert flops_peak(H200_LIKE, "bfloat16") == ("bf16", 750.0)
    assert flops_peak(H200_LIKE, "float32") == ("tf32", 380.0)
    no_tf32 = H200_LIKE.model_copy(update={"tf32_tflops": None})
    assert flops_peak(no_tf32, "float32") == ("fp32", 50.0)
    assert flops_peak(None, "float32") == (None, None)


# --- kernel names, breakdown, capture --------------------------------------------------------------

def test_triton_kernel_names_are_recognized():
    names = {"linear_relu_kernel", "k"}
    assert is_triton_kernel("linear_relu_kernel", names)
    assert is_triton_kernel("linear_relu_kernel_0d1d2d3de", names)  # older Triton suffix
    assert not is_triton_kernel("void at::native::vectorized_elementwise_kernel<4, float>(int, float*)", names)
    assert not is_triton_kernel("kernel_other", names)
    assert not is_triton_kernel("Memcpy DtoD (Device -> Device)", names)
    assert short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"
                             "(int, float*)") == "vectorized_elementwise_kernel"


def test_kernel_breakdown_merges_sorts_and_shares():
    rows = [("softmax_kernel", 5, 0.8), ("void at::native::copy_kernel<float>(float*)", 5, 0.15),
            ("Memset (Device)", 5, 0.05), ("softmax_kernel", 0, 0.0), ("bad", 1, float("nan"))]
    kernels = kernel_breakdown(rows, runs=5, triton_names={"softmax_kernel"})
    assert [k.name for k in kernels][0] == "softmax_kernel"
    assert len(kernels) == 3
    top = kernels[0]
    assert top.triton and top.calls == 5 and top.total_ms == pytest.approx(0.8)
    assert top.ms_per_run == pytest.approx(0.16) and top.share == pytest.approx(0.8)
    assert sum(k.share for k in kernels) == pytest.approx(1.0)
    assert kernel_breakdown([], runs=5, triton_names=set()) == []


def test_device_rows_keep_only_gpu_entries():
    cuda = SimpleNamespace(name="CUDA")
    cpu = SimpleNamespace(name="CPU")
    events = [
        SimpleNamespace(key="aten::mm", count=5, device_type=cpu, self_device_time_total=0.0),
        SimpleNamespace(key="linear_relu_kernel", count=5, device_type=cuda, self_device_time_total=50.0),
        SimpleNamespace(key="old_torch_kernel", count=2, device_type=cuda, self_cuda_time_total=10.0),
    ]
    assert device_rows(events) == [("linear_relu_kernel", 5, 0.05), ("old_torch_kernel", 2, 0.01)]


def test_kernel_capture_reads_launch_metadata_from_the_returned_kernel():
    meta = SimpleNamespace(name="add_kernel", shared=4096, num_warps=4, num_stages=3)
    compiled = SimpleNamespace(name="add_kernel", metadata=meta, n_regs=40, n_spills=0)

    class FakeJIT:
        __name__ = "add_kernel"

        def run(self, *args, grid, warmup, **kwargs):
            return compiled

    capture = KernelCapture()
    capture.install(FakeJIT)
    fn = FakeJIT()
    assert fn.run(1, 2, grid=(1,), warmup=False) is compiled
    fn.run(1, 2, grid=(1,), warmup=True)  # a warm-up compiles but does not launch
    assert capture.infos()[0].launches == 1
    capture.reset_counts()
    assert capture.infos() == []
    fn.run(1, 2, grid=(1,), warmup=False)
    fn.run(1, 2, grid=(1,), warmup=False)
    (info,) = capture.infos()
    assert info == TritonKernelInfo(name="add_kernel", function="add_kernel", launches=2, n_regs=40, n_spills=0,
                                    shared_bytes=4096, num_warps=4, num_stages=3)
    assert capture.names() == {"add_kernel"}


def test_kernel_capture_tolerates_kernels_without_metadata():
    class FakeJIT:
        __name__ = "k"

        def run(self, *args, grid, warmup, **kwargs):
            return object()

    capture = KernelCapture()
    capture.install(FakeJIT)
    FakeJIT().run(grid=(1,), warmup=False)
    (info,) = capture.infos()
    assert info.name == "k" and info.n_regs is None and info.shared_bytes is None


def test_jit_function_names_unwrap_autotuners():
    class JITFunction:  # named like Triton's so the unwrapping recognizes it
        def __init__(self, name):
            self.__name__ = name

    module = SimpleNamespace(plain=JITFunction("plain"), tuned=SimpleNamespace(fn=JITFunction("tuned")),
                             other=42, torch=torch)
    assert jit_function_names(module) == {"plain", "tuned"}


# --- peaks cache -------------------------------------------------------------------------------------

def test_peaks_cache_round_trip(tmp_path):
    cache = PeaksCache(tmp_path / "peaks.json")
    assert cache.load() == {}
    key = peaks_key("NVIDIA H200", "2.11.0")
    cache.save(key, H200_LIKE)
    cache.save(peaks_key("other", "x"), H200_LIKE.model_copy(update={"device_name": "other"}))
    loaded = PeaksCache(tmp_path / "peaks.json").load()
    assert loaded[key] == H200_LIKE and len(loaded) == 2
    (tmp_path / "peaks.json").write_text("{not json")
    assert cache.load() == {}
    assert plausible_peaks(H200_LIKE)
    assert not plausible_peaks(H200_LIKE.model_copy(update={"copy_gbps": None}))
    assert not plausible_peaks(H200_LIKE.model_copy(update={"bf16_tflops": 1e9}))


# --- report and summary --------------------------------------------------------------------------------

def _hand_built_report(**overrides) -> ProfileReport:
    kernels = kernel_breakdown(
        [("rmsnorm_kernel", 5, 0.40), ("scale_kernel", 5, 0.05),
         ("void at::native::elementwise_kernel<128, 2>(int, float*)", 10, 0.10)],
        runs=5, triton_names={"rmsnorm_kernel", "scale_kernel"})
    infos = [TritonKernelInfo(name="rmsnorm_kernel", function="rmsnorm_kernel", launches=5, n_regs=128,
                              n_spills=0, shared_bytes=0, num_warps=4, num_stages=3),
             TritonKernelInfo(name="scale_kernel", function="scale_kernel", launches=5, n_regs=32, n_spills=12,
                              shared_bytes=1024, num_warps=4, num_stages=1)]
    args = dict(floor={"bytes": 262_144_000, "flops": 0, "dtype": "float32"}, peaks=H200_LIKE, kernels=kernels,
                triton_kernels=infos, candidate_ms=0.128, runs=5, task_id="t", device="cuda:0", profiled=True,
                timing_source="evaluation")
    args.update(overrides)
    return build_report(**args)


def test_report_derives_roofline_numbers():
    r = _hand_built_report()
    assert r.bound == "memory"
    assert r.floor_ms == pytest.approx(262_144_000 / 4300e9 * 1e3)
    assert r.achieved_gbps == pytest.approx(262_144_000 / 0.128e-3 / 1e9)
    assert r.bandwidth_fraction == pytest.approx(r.achieved_gbps / 4300.0)
    assert r.vs_floor == pytest.approx(0.128 / r.floor_ms)
    assert r.triton_share == pytest.approx(0.45 / 0.55)
    assert r.device_ms_per_run == pytest.approx(0.11)
    assert r.launches_per_run == pytest.approx(4.0)
    assert r.achieved_tflops == 0 and r.flops_peak_kind == "tf32"
    assert b"summary" in to_json(r)
    assert ProfileReport.model_validate_json(r.model_dump_json()) == r


def test_summary_is_short_and_actionable():
    r = _hand_built_report()
    text = summarize_profile(r)
    lines = text.splitlines()
    assert 3 <= len(lines) <= 6, text
    assert lines[0].startswith("memory-bound: 2.05 TB/s of 4.30 TB/s measured peak (48%)"), text
    assert "2.1x the floor" in lines[1] and "floor 0.061 ms" in lines[1], text
    assert "2 Triton kernels take 82% of GPU time" in text
    assert "elementwise_kernel" in text and "2 calls/run" in text
    assert "rmsnorm_kernel: 128 regs, spills 0" in text
    assert "scale_kernel spills registers" in text
    assert r.summary == text
    assert all(len(line) < 400 for line in lines)


def test_summary_for_a_compute_bound_candidate_near_the_floor():
    flops = 2 * 4096 ** 3
    r = _hand_built_report(floor={"bytes": 3 * 4096 * 4096 * 2, "flops": flops, "dtype": "bfloat16"},
                           candidate_ms=flops / 700e12 * 1e3)
    assert r.bound == "compute" and r.flops_peak_kind == "bf16"
    assert r.flops_fraction == pytest.approx(700 / 750)
    text = r.summary
    assert text.startswith("compute-bound: 700 of 750 TFLOP/s measured bf16 matmul peak (93%)"), text
    assert "little headroom" in text


def test_summary_when_not_profiled():
    r = build_report(floor={"bytes": 328_192, "flops": 8_388_608, "dtype": "float32"}, peaks=None, kernels=[],
                     triton_kernels=[], candidate_ms=None, runs=0, error=ErrorInfo(
                         error_class="NoGPU", message="profiling needs a CUDA device"))
    assert r.summary.splitlines() == [
        "not profiled: profiling needs a CUDA device",
        "task floor: moves at least 328 KB, 8.39 MFLOP matmul/conv (a time floor needs the GPU's measured peaks)"]
    assert r.triton_share is None and r.floor_ms is None and r.vs_floor is None


def test_summary_is_capped_at_six_lines():
    r = _hand_built_report(notes=["a note"] * 20)
    assert len(r.summary.splitlines()) <= 6


# --- through the evaluator ------------------------------------------------------------------------------

@pytest.mark.skipif(HAS_CUDA, reason="the CPU path")
def test_cpu_profile_returns_the_floor_and_says_why(evaluator):
    task = example_task("matmul_bias_relu")
    report = evaluator.profile(task, (EXAMPLES / "kernels" / "matmul_bias_relu.py").read_text())
    assert isinstance(report, ProfileReport)
    assert not report.profiled and report.device == "cpu"
    assert report.floor_flops == 2 * 128 * 128 * 256
    assert report.floor_bytes == 4 * (128 * 256 + 128 * 256 + 128 + 128 * 128)
    assert report.floor_dtype == "float32"
    assert report.peaks is None and report.floor_ms is None and report.kernels == []
    assert report.triton_share is None and report.candidate_ms is None
    assert "CUDA device" in report.summary and "328 KB" in report.summary
    assert report.task_id == task.task_id and report.source_hash


@gpu
def test_gpu_profile_of_matmul(evaluator):
    from pathlib import Path

    task = example_task("matmul_bias_relu")
    source = (EXAMPLES / "kernels" / "matmul_bias_relu.py").read_text()
    report = evaluator.profile(task, source)
    print(report.model_dump_json(indent=1))
    print(report.summary)
    assert report.error is None, report.error
    assert report.profiled
    # peaks
    p = report.peaks
    assert p is not None and p.copy_gbps and p.copy_gbps > 100, p
    assert p.bf16_tflops and p.bf16_tflops > 10 and p.fp32_tflops and p.fp32_tflops > 1, p
    assert (Path(evaluator.work_dir) / "device_peaks.json").exists()
    # breakdown
    assert report.kernels and report.profiled_runs > 0
    assert report.triton_share is not None and report.triton_share > 0, report.kernels
    assert any(k.triton and "linear_relu_kernel" in k.name for k in report.kernels), report.kernels
    # launch metadata
    info = [k for k in report.triton_kernels if k.function == "linear_relu_kernel"]
    assert info and info[0].n_regs and info[0].n_regs > 0, report.triton_kernels
    assert info[0].n_spills is not None and info[0].num_warps and info[0].shared_bytes is not None
    # floor and roofline
    assert report.floor_flops == 2 * 128 * 128 * 256
    assert report.floor_ms and report.floor_ms > 0
    assert report.candidate_ms and report.candidate_ms > 0
    assert report.vs_floor and report.vs_floor > 0
    assert report.achieved_gbps and report.achieved_gbps > 0
    assert 2 <= len(report.summary.splitlines()) <= 6
    # the second profile reuses the cached peaks
    again = evaluator.profile(task, source)
    assert again.peaks == report.peaks


PASS_THROUGH = '''

import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


class ModelNew(Model):
    def forward(self, *args):
        y = super().forward(*args).contiguous()
        out = torch.empty_like(y)
        _copy[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK=1024)
        return out
'''


@gpu
def test_a_pass_through_is_flagged_yet_profiled_and_its_triton_share_is_small(evaluator):
    task = example_task("matmul_bias_relu")
    source = task.source + PASS_THROUGH
    assert evaluator.evaluate(task, source).status.value == "cheat_detected"
    report = evaluator.profile(task, source)
    assert report.error is None and report.profiled, report.summary
    assert any("profiled although cheat_detected" in n for n in report.notes), report.notes
    assert report.triton_share is not None and 0 < report.triton_share < 0.9, report.kernels
    assert any(k.triton and "_copy" in k.name for k in report.kernels) and any(not k.triton for k in report.kernels)


def test_summary_of_a_tiny_task_points_at_launch_overhead():
    r = _hand_built_report(floor={"bytes": 328_192, "flops": 8_388_608, "dtype": "float32"}, candidate_ms=0.009,
                           triton_kernels=[])
    assert r.floor_ms < 0.005 and r.vs_floor > 50
    assert "launch overhead dominates" in r.summary, r.summary
    assert "us" in r.summary.splitlines()[1]


@pytest.mark.filterwarnings("ignore:CUDA is not available")
@pytest.mark.skipif(torch.cuda.is_available(), reason="simulates the GPU branch on a CPU-only machine")
def test_worker_candidate_path_reports_its_messages_on_cpu(monkeypatch, tmp_path):
    """The GPU branch of the profile job, run on the CPU with the CUDA calls stubbed out."""
    import sys

    from triton.runtime.jit import JITFunction

    from adaexplore.evaluator.profile import run as profile
    from adaexplore.evaluator.worker import timing

    monkeypatch.setattr(JITFunction, "run", JITFunction.run)  # the capture's wrapper goes at teardown
    monkeypatch.setitem(sys.modules, "candidate", None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(timing, "time_on_gpu", lambda run, prepare, **kw: timing.Measured([0.5] * kw["runs"], [], [], run(0)))

    class Rep:
        def __init__(self):
            self.messages = []

        def send(self, head, tensors=None):
            self.messages.append(head)

    rep, notes = Rep(), []
    protocol = EvalProtocol(warmup_runs=1, timed_runs=4)
    task = harness.load_task((EXAMPLES / "tasks" / "gelu_scale.py").read_text())
    source = (EXAMPLES / "kernels" / "gelu_scale.py").read_text()
    job = {"scratch": str(tmp_path), "time_candidate": True}
    assert profile._profile_candidate_in_worker(job, rep, task, protocol, torch.device("cpu"), source, notes.append)
    kinds = {m["kind"]: m for m in rep.messages}
    assert kinds["timing"]["median_ms"] == 0.5
    assert kinds["kernels"]["runs"] == profile.PROFILE_RUNS and kinds["kernels"]["rows"] == []
    assert kinds["kernels"]["triton_names"] == ["gelu_scale_kernel"]  # the candidate's @triton.jit functions
    assert "triton" in kinds
    assert any("no GPU kernels" in n for n in notes), notes


def test_worker_reports_a_broken_candidate(monkeypatch, tmp_path):
    import sys

    from triton.runtime.jit import JITFunction

    from adaexplore.evaluator.profile import run as profile

    monkeypatch.setattr(JITFunction, "run", JITFunction.run)
    monkeypatch.setitem(sys.modules, "candidate", None)

    class Rep:
        def __init__(self):
            self.messages = []

        def send(self, head, tensors=None):
            self.messages.append(head)

    rep = Rep()
    task = harness.load_task((EXAMPLES / "tasks" / "softmax.py").read_text())
    ok = profile._profile_candidate_in_worker({"scratch": str(tmp_path)}, rep, task, EvalProtocol(), torch.device("cpu"),
                                              "import nonexistent_module_xyz\n", lambda n: None)
    assert not ok and rep.messages[-1]["kind"] == "error"
