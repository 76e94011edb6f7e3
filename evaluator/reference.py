"""What the reference did: its outputs, flags and baseline timings, from a trusted worker."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import torch

from ..common.vocab import Kind, Phase
from .results import ErrorInfo, TimingStats
from .sandbox.pool import WorkerResult
from .verdict import worker_failure


def _set_event() -> threading.Event:
    event = threading.Event()
    event.set()
    return event


@dataclass
class Reference:
    """What the reference did, measured in a process that never saw candidate code.

    Its outputs live in the judge (`judge_key`); only their shapes and dtypes are kept here.
    Without a judge (the cold mode, tests) the tensors themselves are kept in `outputs`,
    `inputs`, `repeat` and `check_outputs`.
    """

    outputs: list[list[torch.Tensor]] = field(default_factory=list)
    judge_busy: bool = False  # the judge turned its outputs away for want of room (ours; try again)
    judge_need_bytes: int = 0  # what it had reached in the judge when turned away: at least what it needs
    output_metas: list[dict] = field(default_factory=list)  # {"shape", "dtype"} of each output
    judge_key: str | None = None
    judge_generation: int = 0
    peak_device_bytes: int = 0  # the reference worker's peak on the device (0: unknown, or the CPU)
    inputs: list[torch.Tensor] = field(default_factory=list)
    repeat: list[torch.Tensor] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    flags: list[dict] = field(default_factory=list)
    # What its outputs show (`verdict.degenerate_flags`), found once they are stored; None: not yet.
    output_flags: list[dict] | None = None
    error: ErrorInfo | None = None
    timing: TimingStats | None = None
    check_outputs: list[torch.Tensor] = field(default_factory=list)
    compile_timing: TimingStats | None = None
    compile_note: str | None = None
    device_info: dict = field(default_factory=dict)
    elapsed_s: float = 0.0
    forward_s: float = 0.0  # one forward of its correctness trials, on average (synchronized)
    # Cleared while the baselines (eager, torch.compile) of this reference are being measured;
    # `eager_ready` is set again as soon as the eager one is known (speedups need no more).
    baselines_ready: threading.Event = field(default_factory=_set_event)
    eager_ready: threading.Event = field(default_factory=_set_event)


    def best_ms(self) -> float | None:
        """The faster of the measured baselines (eager, torch.compile)."""
        times = [t.runtime_ms for t in (self.timing, self.compile_timing) if t is not None and t.runtime_ms > 0]
        return min(times) if times else None

    @classmethod
    def from_report(cls, res: WorkerResult) -> "Reference":
        """Collect a reference worker's messages (outputs, inputs, ops, flags, device)."""
        ref = cls(error=worker_failure(res, subject="reference"))
        if ref.error is not None:
            return ref
        for head, tensors in res.messages:
            kind = head.get("kind")
            if kind in (Kind.trial, Kind.inputs, Kind.repeat, Kind.check) and tensors and isinstance(tensors[0], dict):
                ref.judge_busy = ref.judge_busy or bool(tensors[0].get("busy"))
                need = tensors[0].get("need_bytes")
                if isinstance(need, int):
                    ref.judge_need_bytes = max(ref.judge_need_bytes, need)
                ref.error = ref.error or _store_failure(tensors[0])
                if kind == Kind.trial and not ref.output_metas:
                    ref.output_metas = [dict(m) for m in head.get("tensors", [])]
                continue
            if kind == Kind.trial:
                ref.outputs.append(tensors)
                if not ref.output_metas:
                    ref.output_metas = [{"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
                                        for t in tensors]
            elif kind == Kind.inputs:
                ref.inputs = tensors
            elif kind == Kind.repeat:
                ref.repeat = tensors
            elif kind == Kind.ops:
                ref.ops = list(head.get("ops", []))
                ref.flags = list(head.get("flags", []))
            elif kind == Kind.check:
                ref.check_outputs = tensors
            elif kind == Kind.device:
                ref.device_info = {k: str(head.get(k, "")) for k in ("name", "torch", "triton")}
                peak = head.get("peak_bytes")
                ref.peak_device_bytes = peak if isinstance(peak, int) and peak > 0 else 0
                phases = head.get("phases")
                forward = phases.get(Phase.forward) if isinstance(phases, dict) else None
                trials = sum(1 for h, _ in res.messages if h.get("kind") == Kind.trial)
                if isinstance(forward, (int, float)) and forward > 0:
                    ref.forward_s = float(forward) / max(1, trials)
            elif kind == Kind.error:
                ref.error = ErrorInfo.model_validate(head["error"])
        return ref


def _store_failure(answer: dict) -> ErrorInfo | None:
    """Why the judge did not keep a reference output, or None if it did."""
    if answer.get("stored"):
        return None
    if answer.get("busy"):
        return ErrorInfo(error_class="InfraError", message="the judge had no room beside the references in use: "
                         + str(answer.get("error", ""))[:300])
    if answer.get("too_large"):
        return ErrorInfo(error_class="TaskTooLarge", message=str(answer.get("error", ""))[:400]
                         + ": this task's outputs cannot be held for comparison on this machine")
    return ErrorInfo(error_class="InfraError", message="the judge did not keep the reference outputs: "
                     + str(answer.get("error", "no answer"))[:300])
