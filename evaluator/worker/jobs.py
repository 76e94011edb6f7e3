"""The three kinds of work a worker process does: reference, candidate check, timing.

Runs inside a forked worker process; it reports facts and decides nothing.
"""

from __future__ import annotations

import os

import torch

from ...common.vocab import Kind, Phase
from ..messages import output_checked
from ..results import EvalProtocol, Status
from . import guards, harness, timing
from .harness import Reporter


def _device(job: dict, rep: Reporter) -> torch.device:
    """The job's device, its CUDA context made now (timed as the job's `cuda` phase)."""
    with rep.lap(Phase.cuda):
        dev = torch.device(job["device"])
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
    return dev


def _forward(model, inputs: list):
    with torch.no_grad():
        return model(*inputs)


def _fail(rep: Reporter, status: Status, exc: BaseException, source: str | None, phase: str) -> None:
    if harness.cache_race(exc):
        # Another process was writing the same kernel into the shared Triton cache: our fault.
        rep.send({"kind": Kind.infra, "message": f"Triton cache race during {phase}: {type(exc).__name__}: {exc}"[:600]})
        return
    rep.send({"kind": Kind.error, "status": status.value, "phase": phase, "error": harness.error_info(exc, source)})


def load_task_or_report(job: dict, rep: Reporter):
    """The task's module, or None once its failure is reported as ours (it loaded at registration)."""
    try:
        return harness.load_task(job["task_source"])
    except BaseException as exc:  # noqa: BLE001
        rep.send({"kind": Kind.infra, "message": f"task failed to load in worker: {exc}"})
        return None


def run_reference(job: dict, rep: Reporter) -> None:
    """Outputs of the reference for every trial, and the facts task validation needs."""
    protocol = EvalProtocol.model_validate(job["protocol"])
    device = _device(job, rep)
    try:
        with rep.lap(Phase.load):
            task = harness.load_task(job["task_source"])
            model = harness.build_model(task.Model, task, protocol, device)
    except BaseException as exc:  # noqa: BLE001 - any failure of the task is reported
        _fail(rep, Status.import_error, exc, None, "load")
        return
    flags: list[dict] = []
    dropout = [n for n, m in model.named_modules() if isinstance(m, torch.nn.modules.dropout._DropoutNd)
               and m.training and m.p > 0]
    if dropout:
        flags.append({"code": "training_dropout",
                      "message": f"dropout in training mode ({', '.join(dropout[:3])}): output is random"})
    try:
        ops: set[str] = set()
        for t in range(protocol.correctness_trials):
            with rep.lap(Phase.inputs):
                inputs = harness.make_inputs(task, harness.trial_seed(protocol, t), device)
            before = harness.snapshot_inputs(inputs)
            with rep.lap(Phase.forward):
                with guards.recording(poison=False) as rec:
                    outputs = harness.as_outputs(_forward(model, inputs))
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
            ops |= rec.ops
            if t == 0:
                if harness.inputs_changed(before, inputs):
                    flags.append({"code": "mutates_input", "message": "the reference writes into its inputs"})
                # Same inputs, different global RNG state: a deterministic forward agrees with itself.
                torch.manual_seed(987654321)
                again = harness.as_outputs(_forward(model, harness.snapshot_inputs(before)))
                # Only an input that an output could equal matters (the equals_input flag); the
                # others go as empty placeholders, which keeps positions and saves moving them.
                kinds = {(tuple(o.shape), o.dtype) for o in outputs if isinstance(o, torch.Tensor)}
                rep.send({"kind": Kind.inputs}, [x if (tuple(x.shape), x.dtype) in kinds else x.new_empty(0)
                                              for x in before if isinstance(x, torch.Tensor)])
                rep.send({"kind": Kind.repeat}, [o for o in again if isinstance(o, torch.Tensor)])
            bad = [i for i, o in enumerate(outputs) if not isinstance(o, torch.Tensor)]
            if bad:
                raise TypeError(f"reference output {bad[0]} is not a tensor")
            rep.send({"kind": Kind.trial, "trial": t}, outputs)
        rep.send({"kind": Kind.ops, "ops": sorted(guards.compute_ops(ops)), "flags": flags})
        if job.get("check_run"):
            # The output for the inputs of the check run after timing, so timing of the
            # reference itself can come from the baseline cache.
            check = _check_inputs(task, protocol, device)
            rep.send({"kind": Kind.check}, [o for o in harness.as_outputs(_forward(model, check))
                                         if isinstance(o, torch.Tensor)])
        # The device memory it took at its peak: later jobs of this task reserve that much.
        peak = torch.cuda.max_memory_reserved(device) if device.type == "cuda" else 0
        rep.send({"kind": Kind.device, **device_info(device), "peak_bytes": int(peak), "phases": rep.phase_report()})
    except BaseException as exc:  # noqa: BLE001
        _fail(rep, harness.classify(exc, "run"), exc, None, "run")
        return
    rep.send({"kind": Kind.done})


def device_info(device: torch.device) -> dict:
    """What identifies the measuring machine in the baseline cache."""
    import platform

    import triton

    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = platform.processor() or platform.machine() or "cpu"
    return {"name": name, "torch": torch.__version__, "triton": triton.__version__}


def _check_inputs(task, protocol: EvalProtocol, device: torch.device) -> list:
    i = harness.CHECK_RUN
    variant = harness.make_inputs(task, harness.timing_seed(protocol, i % harness.TIMING_VARIANTS), device)
    return shifted(variant, i)


def run_candidate(job: dict, rep: Reporter) -> None:
    """Load the candidate and run the correctness trials, reporting what it did."""
    protocol = EvalProtocol.model_validate(job["protocol"])
    source = job["candidate_source"]
    device = _device(job, rep)
    counter = guards.LaunchCounter()
    counter.install()
    flag_guard = guards.FlagGuard()
    with rep.lap(Phase.load):
        task = load_task_or_report(job, rep)
    if task is None:
        return
    try:
        with rep.lap(Phase.load):
            module = harness.load_candidate(source, job["scratch"])
    except BaseException as exc:  # noqa: BLE001
        status = Status.syntax_error if isinstance(exc, SyntaxError) else harness.classify(exc, "import")
        _fail(rep, status, exc, source, "import")
        return
    if not _check_clean(rep, flag_guard, "import"):
        return
    cls = getattr(module, "ModelNew", None)
    if cls is None:
        rep.send({"kind": Kind.error, "status": Status.import_error.value, "phase": "import",
                  "error": {"error_class": "AttributeError", "message": "candidate defines no ModelNew"}})
        return
    try:
        with rep.lap(Phase.load):
            model = harness.build_model(cls, task, protocol, device)
    except BaseException as exc:  # noqa: BLE001
        _fail(rep, harness.classify(exc, "init"), exc, source, "init")
        return
    ops: set[str] = set()
    for t in range(protocol.correctness_trials):
        try:
            with rep.lap(Phase.inputs):
                inputs = harness.make_inputs(task, harness.trial_seed(protocol, t), device)
            before = harness.snapshot_inputs(inputs)
            # The first forward compiles the candidate's kernels: its own phase.
            with rep.lap(Phase.forward if t else Phase.first):
                with guards.recording(poison=True) as rec:
                    outputs = harness.as_outputs(_forward(model, inputs))
                if t == 0:  # compiled and launched: from here on a forward takes its kernels' time
                    rep.send({"kind": Kind.launched})
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
        except BaseException as exc:  # noqa: BLE001
            _fail(rep, harness.classify(exc, "run"), exc, source, "run")
            return
        ops |= rec.ops
        if not _check_clean(rep, flag_guard, "run"):
            return
        if harness.inputs_changed(before, inputs):
            rep.send({"kind": Kind.violation, "reason": "the candidate wrote into its input tensors"})
            return
        violation = harness.output_violation(outputs, inputs)
        if violation:
            rep.send({"kind": Kind.violation, "reason": violation})
            return
        rep.send({"kind": Kind.trial, "trial": t, "launches": counter.count}, outputs)
    if protocol.correctness_trials > 1:
        _run_unlaunched(rep, model, task, protocol, device, counter)
        if not _check_clean(rep, flag_guard, "run"):
            return
    if job.get("hand_on_compiled"):  # what it compiled, so that its timing jobs need not compile it again
        compiled = harness.pack_compiled(job["scratch"])
        if compiled:
            rep.send({"kind": Kind.compiled}, [torch.frombuffer(bytearray(compiled), dtype=torch.uint8)])
    rep.send({"kind": Kind.ops, "ops": sorted(guards.compute_ops(ops)), "launches": counter.count,
              "flags_reset": flag_guard.restore(), "phases": rep.phase_report()})
    if job.get("then_time"):
        # The same process goes on to time the candidate: CUDA, the module, its kernels and the
        # task are ready. The trusted side opens the timing gate only once the trials above are
        # judged correct; otherwise it kills this process there.
        rep.send({"kind": Kind.checked})
        counter.uninstall()
        inputs = before = outputs = []  # the last trial's tensors: timing makes its own inputs
        try:
            _time(job, rep, model, task, protocol, device, flag_guard, module)
        except BaseException as exc:  # noqa: BLE001
            _fail(rep, harness.classify(exc, "run"), exc, source, "timing")
            return
    rep.send({"kind": Kind.done})


def _run_unlaunched(rep: Reporter, model, task, protocol: EvalProtocol, device: torch.device,
                    counter: guards.LaunchCounter) -> None:
    """The forward once more on trial 0's inputs with every Triton launch dropped; what it
    returns goes to the trusted side, where output still right means the kernels did none of
    the work (a thread, numpy or a library did it). After the last trial, so a buffer kept from
    the forward before holds another trial's output, never this one's."""
    inputs = harness.make_inputs(task, harness.trial_seed(protocol, 0), device)
    try:
        with counter.skipping(), guards.recording(poison=True):
            outputs = harness.as_outputs(_forward(model, inputs))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Exception:  # noqa: BLE001 - failing without its kernels is what an honest forward may do
        rep.send({"kind": Kind.unlaunched, "raised": True})
        return
    tensors = [o for o in outputs if isinstance(o, torch.Tensor)]
    if len(tensors) != len(outputs):
        rep.send({"kind": Kind.unlaunched, "raised": True})
        return
    rep.send({"kind": Kind.unlaunched}, tensors)


def run_timing(job: dict, rep: Reporter) -> None:
    """Time a model (candidate or reference) under the protocol; report samples and last output."""
    protocol = EvalProtocol.model_validate(job["protocol"])
    device = _device(job, rep)
    source = job.get("candidate_source")
    flag_guard = guards.FlagGuard()
    if source and job.get("compiled"):  # the kernels its correctness job compiled, before anything loads
        harness.unpack_compiled(job["compiled"], job["scratch"])
    try:
        with rep.lap(Phase.load):
            task = harness.load_task(job["task_source"])
            module = harness.load_candidate(source, job["scratch"]) if source else None
            cls = module.ModelNew if module is not None else task.Model
            model = harness.build_model(cls, task, protocol, device)
            if job.get("compile") and not source:
                model = _compiled(model, job)
    except BaseException as exc:  # noqa: BLE001
        _fail(rep, harness.classify(exc, "import"), exc, source, "load")
        return
    try:
        _time(job, rep, model, task, protocol, device, flag_guard, module)
    except BaseException as exc:  # noqa: BLE001
        _fail(rep, harness.classify(exc, "run"), exc, source, "timing")
        return
    rep.send({"kind": Kind.done})


def _compiled(model, job: dict):
    """The reference under torch.compile (the second baseline); compiled in this process."""
    import torch._inductor.config as inductor_config

    if job.get("inductor_cache_dir"):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = job["inductor_cache_dir"]
    # Worker pools of fresh interpreters would cost seconds each; compile in this process.
    inductor_config.compile_threads = 1
    return torch.compile(model, **(job.get("compile_options") or {}))


def shifted(inputs: list, i: int) -> list:
    """Run i's inputs: variant i % V, rolled along its first non-trivial dim by i // V.

    Every timed run sees values it has not seen before, so no cache keyed on pointers, shapes
    or sampled values can return a stored result; the check run's output is verified.
    """
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.dim() and (i // harness.TIMING_VARIANTS):
            dim = next((d for d in range(x.dim()) if x.shape[d] > 1), None)
            if dim is not None:
                x = torch.roll(x, shifts=(i // harness.TIMING_VARIANTS) % x.shape[dim], dims=dim)
        out.append(x)
    return out


def retune(tuners: list) -> None:
    """Forget what each autotuner chose, so its next call tunes again (on a quiet GPU, after the
    gate). A choice stored on disk was made under load, maybe on another GPU: not read back."""
    for tuner in tuners:
        tuner.cache.clear()
        if getattr(tuner, "cache_results", False):
            tuner.cache_results = False


def tuned(tuners: list) -> list[str]:
    """`kernel: config` for every choice the autotuners hold (a one-config tuner holds none)."""
    out = []
    for tuner in tuners:
        name = getattr(getattr(tuner, "base_fn", None), "__name__", "kernel")
        configs = list(tuner.cache.values()) or [c for c in [getattr(tuner, "best_config", None)] if c is not None]
        out += [f"{name}: {config}" for config in configs]
    return out[:8]


def _time(job, rep, model, task, protocol: EvalProtocol, device, flag_guard: guards.FlagGuard | None = None,
          module=None) -> None:
    with rep.lap(Phase.inputs):
        variants = [harness.make_inputs(task, harness.timing_seed(protocol, v), device)
                    for v in range(harness.TIMING_VARIANTS)]
        live = [x.clone() if isinstance(x, torch.Tensor) else x for x in variants[0]]

    def prepare(i: int) -> None:
        # Refresh the inputs in place, outside the timed region: same pointers, new values.
        for dst, src in zip(live, shifted(variants[i % len(variants)], i)):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)

    def run(_i: int):
        with torch.no_grad():
            return model(*live)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    # The first call compiles (and autotunes): it runs before the gate, alongside other
    # processes' work; only what follows has the GPU to itself. Autotuners are looked for after
    # it, so one made on first use (inside a class, a closure) is found too.
    with rep.lap(Phase.first):
        prepare(0)
        run(0)
        sync()
    tuners = harness.autotuners(module) if module is not None else []
    rep.wait_for_gpu()
    # Those choices were made while other work shared the GPU: tune again, now, on a quiet GPU
    # (as a process alone on it would), once per input variant and before any timed run.
    if tuners:
        with rep.lap(Phase.retune):
            retune(tuners)
            for v in range(harness.TIMING_VARIANTS):
                prepare(v)
                run(v)
            sync()
    chosen = {id(t): dict(t.cache) for t in tuners}
    # Flags a candidate changed at import are put back before anything is measured.
    if flag_guard:
        flag_guard.restore()

    def measure():
        with rep.lap(Phase.timed):
            return timing.time_model(run, prepare, warmup=protocol.warmup_runs, runs=protocol.timed_runs,
                                     flush_l2=protocol.flush_l2, device=device, budget_ms=protocol.timed_budget_ms,
                                     least=protocol.min_timed_runs)

    measured = measure()
    if any(dict(t.cache) != chosen[id(t)] for t in tuners):
        # A kernel tuned inside the timed region (first called there): its choices are made
        # now, so a second measurement times only the kernels.
        measured = measure()
    prepare(harness.CHECK_RUN)
    last = run(harness.CHECK_RUN)
    sync()
    reset = flag_guard.restore() if flag_guard else []
    outputs = [o for o in harness.as_outputs(last) if isinstance(o, torch.Tensor)] if output_checked(job) else []
    rep.send({"kind": Kind.timing, "event_ms": measured.event_ms, "drain_ms": measured.drain_ms,
              "flush_ms": measured.flush_ms,
              "method": "cuda_events" if device.type == "cuda" else "host_clock",
              "replaced": guards.replaced_functions(), "flags_reset": reset,
              "autotuned": tuned(tuners), "phases": rep.phase_report()}, outputs)


def _check_clean(rep: Reporter, flag_guard: guards.FlagGuard, phase: str) -> bool:
    replaced = guards.replaced_functions()
    if replaced:
        rep.send({"kind": Kind.violation, "reason": f"candidate replaced harness functions during {phase}: "
                                                 + ", ".join(replaced)})
        return False
    flag_guard.restore()
    return True
