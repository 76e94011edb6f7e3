"""Result and configuration types of the evaluator (statuses are the shared vocabulary's `Status`).

Everything here crosses a process or MCP boundary, so it is a pydantic model that
serializes to plain JSON (see :func:`to_json`).
"""

from __future__ import annotations

import warnings
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from ..common.vocab import Severity, Status

NO_TRITON_KERNEL = "the forward pass launches no Triton kernel"
"""The error message of `no_triton_kernel`, whether the run counted no launch or the static checks found that none
can happen: one message, so the skill memory sees one failure signature."""
NO_TRITON_KERNEL_HINT = "compute the result in a @triton.jit kernel launched as kernel[grid](...)"


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Tolerance(Model):
    """Elementwise check |out - ref| <= atol + rtol * |ref|; NaN never passes."""

    name: str = "default"
    atol: float = 1e-2
    rtol: float = 1e-2


TOLERANCE_PROFILES: dict[str, Tolerance] = {
    "default": Tolerance(name="default", atol=1e-2, rtol=1e-2),
    "strict": Tolerance(name="strict", atol=1e-4, rtol=1e-4),
    "fp32": Tolerance(name="fp32", atol=1e-5, rtol=1e-5),
    "loose": Tolerance(name="loose", atol=5e-2, rtol=5e-2),
}


class EvalProtocol(Model):
    """How a candidate is checked and timed. Part of the result cache key."""

    correctness_trials: int = Field(5, ge=1, le=50)
    tolerance: Tolerance = Field(default_factory=Tolerance)
    warmup_runs: int = Field(10, ge=0, le=1000)
    timed_runs: int = Field(100, ge=1, le=10000)
    # Timed runs stop once they have taken about this long, after at least `min_timed_runs` (and
    # at most `timed_runs`): a 3 ms kernel needs no 100 runs to be known within a tenth of a
    # percent, and the GPU is held alone while it is timed. 0 times `timed_runs` runs always.
    timed_budget_ms: float = Field(100.0, ge=0.0, le=60_000.0)
    min_timed_runs: int = Field(20, ge=1, le=10000)
    trim_fraction: float = Field(0.05, ge=0.0, lt=0.5)
    flush_l2: bool = True
    timeout_s: float = Field(120.0, gt=0, le=3600)
    seed: int = 42

    def key(self) -> str:
        """A short stable string identifying this protocol for caching."""
        import hashlib

        return hashlib.sha256(orjson.dumps(self.model_dump(), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


class TimingStats(Model):
    """Runtime statistics in milliseconds over `runs` timed runs (after trimming)."""

    mean_ms: float
    median_ms: float
    std_ms: float
    min_ms: float
    runs: int
    method: str = "cuda_events"

    @property
    def runtime_ms(self) -> float:
        """The runtime a speedup is computed from: the median, which a few disturbed runs
        inside a measurement do not move (the mean is reported beside it)."""
        return self.median_ms


class ErrorInfo(Model):
    """What went wrong, short enough to read in a prompt."""

    error_class: str
    message: str
    line: int | None = None
    source_line: str | None = None
    hint: str | None = None


class Mismatch(Model):
    """Where a wrong output differs most from the reference."""

    trial: int
    output_index: int = 0
    max_abs_error: float
    max_rel_error: float
    index: list[int] = Field(default_factory=list)
    expected: float | None = None
    got: float | None = None
    mismatched_fraction: float = 0.0


with warnings.catch_warnings():
    # `construct` is the clearest name for the offending code; pydantic's deprecated
    # classmethod of that name is never used here.
    warnings.simplefilter("ignore", UserWarning)

    class LintIssue(Model):
        """One finding of the static checks; `construct` is the offending code, e.g. `tl.float32(`."""

        line: int
        message: str
        construct: str  # type: ignore[assignment]  # shadows the deprecated BaseModel.construct
        severity: Severity = Severity.error


class EvalResult(Model):
    """The outcome of evaluating one candidate against one task."""

    status: Status
    task_id: str = ""
    source_hash: str = ""
    device: str = "cpu"
    protocol_key: str = ""
    error: ErrorInfo | None = None
    mismatch: Mismatch | None = None
    cheat_reason: str | None = None
    lint: list[LintIssue] = Field(default_factory=list)
    trials_passed: int = 0
    trials: int = 0
    triton_launches: int = 0
    timing: TimingStats | None = None
    reference_timing: TimingStats | None = None
    compile_timing: TimingStats | None = None
    speedup: float | None = None
    speedup_vs_best: float | None = None
    compile_note: str | None = None
    timing_note: str | None = None
    flags_reset: list[str] = Field(default_factory=list)
    autotune_configs: list[str] = Field(default_factory=list, description="the config each autotuned kernel "
                                                                          "chose for the timed runs")
    stdout_tail: str | None = None
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is Status.correct

    def feedback(self, max_chars: int = 1200) -> str:
        """A few lines an agent can act on."""
        parts = [f"status: {self.status.value}"]
        if self.cheat_reason:
            parts.append(f"reason: {self.cheat_reason}")
        if self.error:
            e = self.error
            where = f" (line {e.line}: {e.source_line.strip()})" if e.line and e.source_line else (
                f" (line {e.line})" if e.line else "")
            parts.append(f"{e.error_class}: {e.message}{where}")
            if e.hint:
                parts.append(f"hint: {e.hint}")
        for issue in self.lint[:5]:
            if self.error and self.error.line in (None, issue.line) and self.error.message in issue.message:
                continue  # the error above already says it (one message per problem)
            parts.append(f"lint line {issue.line}: {issue.severity}: {issue.message}")
        if self.mismatch:
            m = self.mismatch
            parts.append(
                f"trial {m.trial} output {m.output_index}: max abs err {m.max_abs_error:.3g}, "
                f"max rel err {m.max_rel_error:.3g} at {m.index} (expected {m.expected}, got {m.got}); "
                f"{m.mismatched_fraction:.1%} of elements out of tolerance")
        if self.status is Status.correct:
            parts.append(f"passed {self.trials_passed}/{self.trials} trials")
        if self.timing:
            parts.append(f"runtime {self.timing.runtime_ms:.4f} ms (median of {self.timing.runs} runs; "
                         f"mean {self.timing.mean_ms:.4f})")
        if self.speedup is not None:
            parts.append(f"speedup {self.speedup:.3f}x vs reference")
            if self.compile_timing is not None and self.speedup_vs_best is not None:
                parts.append(f"speedup {self.speedup_vs_best:.3f}x vs the faster of eager and torch.compile "
                             f"({self.compile_timing.runtime_ms:.4f} ms compiled)")
        if self.timing_note:
            parts.append(f"timing: {self.timing_note}")
        if self.autotune_configs:
            parts.append("autotune chose: " + "; ".join(self.autotune_configs))
        if self.flags_reset:
            parts.append("reset global flags: " + ", ".join(self.flags_reset))
        if self.stdout_tail and self.status is not Status.correct:
            parts.append("output: " + last_lines(self.stdout_tail, 300))
        return first_lines("\n".join(parts), max_chars)


def _whole_lines(lines: list[str], max_chars: int) -> list[str]:
    """The leading lines of `lines` that fit, joined by newlines, in `max_chars`; a first line too long
    on its own keeps its beginning, marked '...'."""
    kept: list[str] = []
    size = -1
    for line in lines:
        if size + 1 + len(line) > max_chars:
            break
        kept.append(line)
        size += 1 + len(line)
    if not kept and lines:
        kept.append(lines[0][: max(0, max_chars - 3)] + "...")
    return kept


def first_lines(text: str, max_chars: int) -> str:
    """`text` if it fits in `max_chars`, else its first whole lines that do, and a last line '...'."""
    if len(text) <= max_chars:
        return text
    lines = text.splitlines()
    kept = _whole_lines(lines, max_chars - 4)
    if kept[0] != lines[0]:  # the first line alone is too long: its beginning says it is cut
        return _whole_lines(lines, max_chars)[0]
    return "\n".join(kept + ["..."])


def last_lines(text: str, max_chars: int) -> str:
    """The end of `text` cut at a line boundary: its last whole lines (blank ones left out) that fit in
    `max_chars`. A last line longer than that on its own keeps its beginning (where a warning names its
    file and kind), marked '...'."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(reversed(_whole_lines(lines[::-1], max_chars)))


class TaskFlag(Model):
    """A problem found when a task was validated, shown to agents."""

    code: Literal[
        "nondeterministic", "random_in_forward", "training_dropout", "all_zeros", "constant_output",
        "equals_input", "zeros_pass", "mutates_input", "nan_in_reference", "slow_reference",
    ]
    message: str


class TaskValidation(Model):
    """The outcome of registering a task."""

    ok: bool
    error: ErrorInfo | None = None
    flags: list[TaskFlag] = Field(default_factory=list)
    output_shapes: list[list[int]] = Field(default_factory=list)
    output_dtypes: list[str] = Field(default_factory=list)
    reference_timing: TimingStats | None = None
    compile_timing: TimingStats | None = None
    compile_note: str | None = None
    device: str = "cpu"
    elapsed_s: float = 0.0


def to_json(model: BaseModel) -> bytes:
    """Serialize a model compactly for the wire or storage."""
    return orjson.dumps(model.model_dump(mode="json", exclude_none=True))
