"""The profile job (in a forked worker) and `profile_candidate` (in the trusted evaluator process).

Profiling tells where a correct candidate's time goes and how far it is from the task's floor. This
module holds the profile job and the trusted side's entry point; the parts live in:

* `report`: the report types and pure functions (`summarize_profile`, `kernel_breakdown`,
  `build_report`), testable without a GPU;
* `floor`: the task's floor from the reference (FLOPs counted and bytes summed BEFORE the
  candidate is imported) and `floor_ms`;
* `peaks`: device peaks (measured once per device, cached on disk by the trusted parent);
* `worker.kernel_capture`: the candidate's Triton kernels' launch metadata and the profiler's GPU rows.

Here: the worker side (`run_profile`, the job kind "profile", run in a forked worker): peaks,
floor, then the candidate's per-kernel breakdown under `torch.profiler`; and the trusted side
(`profile_candidate`, run in the evaluator process), called by `Evaluator.profile`.

Nothing here is a verdict: numbers come from the candidate's own process and are advice.
Every GPU probe is wrapped so that a failure becomes a note with a reason, never an exception.
"""

from __future__ import annotations

from pathlib import Path

from ...common.vocab import Job, Kind
from ..results import ErrorInfo
from .floor import task_floor
from .peaks import PEAKS_FILE, DevicePeaks, PeaksCache, measure_peaks, peaks_key, plausible_peaks
from .report import ProfileReport, TritonKernelInfo, build_report, kernel_breakdown, summarize_profile

PROFILE_RUNS = 5  # forward passes recorded by torch.profiler
MAX_TIMED_RUNS = 50  # CUDA-event timed runs when the evaluation's timing is not available
MIN_WARMUP = 3


# --- the job ------------------------------------------------------------------------------------------

def run_profile(job: dict, rep) -> None:
    """Peaks, floor, then (with a candidate, on a GPU) the candidate's profile. Reports facts only."""
    import torch

    from ..results import EvalProtocol
    from ..worker import jobs

    protocol = EvalProtocol.model_validate(job["protocol"])
    device = jobs._device(job, rep)
    notes: list[str] = []

    def note(text: str) -> None:
        notes.append(text[:240])

    # 1. device peaks, from the parent's cache or measured now (before any candidate code)
    if device.type == "cuda":
        try:
            key = peaks_key(torch.cuda.get_device_name(device), torch.__version__)
            known = (job.get("known_peaks") or {}).get(key)
            if known:
                rep.send({"kind": Kind.peaks, "key": key, "peaks": known, "cached": True})
            else:
                peaks = measure_peaks(device)
                rep.send({"kind": Kind.peaks, "key": key, "peaks": peaks.model_dump(mode="json"), "cached": False})
        except Exception as exc:  # noqa: BLE001
            note(f"device peaks unavailable: {type(exc).__name__}: {exc}")

    # 2. the floor, from the trusted reference, still before the candidate is imported
    task = jobs.load_task_or_report(job, rep)
    if task is None:
        return
    try:
        rep.send({"kind": Kind.floor, **task_floor(task, protocol, device)})
    except Exception as exc:  # noqa: BLE001
        note(f"floor not computed: {type(exc).__name__}: {exc}")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()

    source = job.get("candidate_source")
    ok = True
    if source and device.type == "cuda":
        ok = _profile_candidate_in_worker(job, rep, task, protocol, device, source, note)
    rep.send({"kind": Kind.notes, "notes": notes})
    if ok:
        rep.send({"kind": Kind.done})


def _profile_candidate_in_worker(job, rep, task, protocol, device, source: str, note) -> bool:
    """Import, warm up, time and profile the candidate; False when it failed (already reported)."""
    import torch

    from ..timing_stats import summarize
    from ..worker import harness, jobs, timing
    from ..worker.kernel_capture import KernelCapture, device_rows, jit_function_names

    # 3. the candidate
    capture = KernelCapture()
    try:
        capture.install()
    except Exception as exc:  # noqa: BLE001
        note(f"Triton launch metadata unavailable: {type(exc).__name__}: {exc}")
    try:
        module = harness.load_candidate(source, job["scratch"])
        model = harness.build_model(module.ModelNew, task, protocol, device)
        inputs = harness.make_inputs(task, harness.timing_seed(protocol, 0), device)
    except BaseException as exc:  # noqa: BLE001
        jobs._fail(rep, harness.classify(exc, "import"), exc, source, "load")
        return False
    triton_names = jit_function_names(module)

    def run(_i: int = 0):
        with torch.no_grad():
            return model(*inputs)

    try:
        for i in range(max(MIN_WARMUP, protocol.warmup_runs)):
            run(i)
        torch.cuda.synchronize(device)
    except BaseException as exc:  # noqa: BLE001
        jobs._fail(rep, harness.classify(exc, "run"), exc, source, "profile")
        return False

    if job.get("time_candidate", True):
        try:
            event_ms = timing.time_on_gpu(run, lambda _i: None, warmup=0,
                                          runs=min(protocol.timed_runs, MAX_TIMED_RUNS),
                                          flush_l2=protocol.flush_l2, device=device).event_ms
            stats = summarize(event_ms, protocol.trim_fraction)
            rep.send({"kind": Kind.timing, "median_ms": stats.median_ms, "mean_ms": stats.mean_ms})
        except Exception as exc:  # noqa: BLE001
            note(f"candidate timing failed: {type(exc).__name__}: {exc}")

    # 4. per-kernel breakdown
    capture.reset_counts()
    try:
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize(device)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(PROFILE_RUNS):
                run(i)
            torch.cuda.synchronize(device)
        rows = device_rows(prof.key_averages())
        if not rows:
            rows = device_rows(prof.events())
        if not rows:
            note("the profiler recorded no GPU kernels (CUPTI unavailable?)")
        triton_names |= capture.names()
        rep.send({"kind": Kind.kernels, "runs": PROFILE_RUNS, "rows": [list(r) for r in rows],
                  "triton_names": sorted(triton_names)})
    except Exception as exc:  # noqa: BLE001
        note(f"torch.profiler failed: {type(exc).__name__}: {exc}")

    try:
        infos = capture.infos()
        if not infos and capture.kernels:
            infos = capture.infos(launched_only=False)
        rep.send({"kind": Kind.triton, "kernels": [k.model_dump(mode="json") for k in infos]})
        if capture.errors:
            note("launch capture: " + "; ".join(capture.errors))
        if not capture.kernels:
            note("no compiled Triton kernel was seen at launch (the launch path may differ in this Triton)")
    except Exception as exc:  # noqa: BLE001
        note(f"Triton launch metadata failed: {type(exc).__name__}: {exc}")
    return True


# --- the trusted side ----------------------------------------------------------------------------------

def profile_candidate(evaluator, task, source: str | None, protocol=None) -> ProfileReport:
    """Profile a correct candidate (or, with no source, only the floor and the peaks). A candidate
    whose outputs matched but that left all the reference's work to PyTorch is profiled too."""
    from ..task import source_hash
    from ..verdict import reuses_reference, worker_failure

    protocol = protocol or task.protocol
    base = {"task_id": task.task_id, "source_hash": source_hash(source) if source else "",
            "device": evaluator.device}
    candidate_ms, timing_source = None, None
    notes: list[str] = []
    if source and evaluator.is_gpu:
        result = evaluator.evaluate(task, source, protocol)
        if reuses_reference(result):
            notes.append(f"profiled although {result.status.value}: {result.cheat_reason}"[:300])
        elif not result.ok:
            detail = result.cheat_reason or (result.error.message if result.error else "")
            report = ProfileReport(**base, error=ErrorInfo(
                error_class="NotCorrect", message=f"only a correct candidate is profiled; this one is "
                                                  f"{result.status.value}" + (f": {detail[:300]}" if detail else "")))
            report.summary = summarize_profile(report)
            return report
        if result.timing is not None:
            candidate_ms, timing_source = result.timing.median_ms, "evaluation"

    cache = PeaksCache(Path(evaluator.work_dir) / PEAKS_FILE)
    job_source = source if evaluator.is_gpu else None
    job = evaluator.runner.job(Job.profile, task, protocol, candidate_source=job_source,
                               known_peaks={k: v.model_dump(mode="json") for k, v in cache.load().items()},
                               time_candidate=candidate_ms is None)
    res = evaluator.runner.run(job, protocol.timeout_s, gpu="exclusive" if evaluator.is_gpu else None)

    floor: dict | None = None
    peaks: DevicePeaks | None = None
    rows: list[tuple[str, int, float]] = []
    runs = 0
    triton_names: set[str] = set()
    triton_infos: list[TritonKernelInfo] = []
    for head, _ in res.messages:
        kind = head.get("kind")
        try:
            if kind == Kind.peaks and peaks is None:
                peaks = DevicePeaks.model_validate(head["peaks"])
                if not head.get("cached"):
                    if plausible_peaks(peaks):
                        cache.save(str(head["key"]), peaks)
                    else:
                        notes.append("measured peaks look implausible; not cached")
            elif kind == Kind.floor and floor is None:
                floor = {"bytes": int(head["bytes"]), "flops": int(head["flops"]), "dtype": head.get("dtype")}
            elif kind == Kind.timing and candidate_ms is None:
                candidate_ms, timing_source = float(head["median_ms"]), "profile run"
            elif kind == Kind.kernels and not rows:
                runs = int(head.get("runs", PROFILE_RUNS))
                rows = [(str(r[0]), int(r[1]), float(r[2])) for r in head.get("rows", [])]
                triton_names = {str(n) for n in head.get("triton_names", [])}
            elif kind == Kind.triton and not triton_infos:
                triton_infos = [TritonKernelInfo.model_validate(k) for k in head.get("kernels", [])]
            elif kind == Kind.infra:
                notes.append("infra: " + str(head.get("message", ""))[:240])
            elif kind == Kind.notes:
                notes.extend(str(n)[:240] for n in head.get("notes", [])[:10])
        except (KeyError, TypeError, ValueError) as exc:
            notes.append(f"unreadable {kind} message: {exc}")

    error = worker_failure(res, subject="profile run")
    if error is None and res.first(Kind.done) is None:
        error = ErrorInfo(error_class="IncompleteRun", message="the profile run ended without finishing")
    kernels = kernel_breakdown(rows, runs, triton_names)
    if not evaluator.is_gpu:
        error = error or ErrorInfo(
            error_class="NoGPU", message=f"profiling needs a CUDA device; this evaluator runs on "
                                         f"{evaluator.device} (only the task's floor was computed)")
    report = build_report(floor=floor, peaks=peaks, kernels=kernels, triton_kernels=triton_infos,
                          candidate_ms=candidate_ms if evaluator.is_gpu else None, runs=runs, notes=notes,
                          **base, profiled=evaluator.is_gpu and bool(source) and error is None,
                          timing_source=timing_source,
                          error=error)
    return report
