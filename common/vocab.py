"""The shared vocabulary: evaluation statuses, tree actions and the message kinds between processes.

A leaf module, imported by every process of adaexplore (the server, CLI commands, the trusted
evaluator, its warm parent and the forked workers): it imports nothing of the package, nor torch,
so any of them can import it cheaply. It lives in `adaexplore.common` because `evaluator`,
`search` and `skills` never import each other and all of them speak these words.

* `Status`: the fixed set of evaluation outcomes (and `PENDING`, a node not evaluated yet);
* `Action`: how a node was made (the root, a large step, a small step);
* `Kind`: the `"kind"` of each frame a worker's harness writes on its result pipe;
* `Job`: the `"kind"` of a job request (which runner the worker starts);
* `Phase`: the parts of a worker job's time it reports (the evaluator's trace shows them);
* `Op`: the `"op"` of each control request from the evaluator's pool to the warm parent;
* `Reply`: the keys of the warm parent's replies on the control socket;
* `JudgeOp`: the `"op"` of each request from the trusted evaluator to the judge process;
* `Severity`: how much a static-check finding weighs.

Each is a `str` enum whose members equal, hash and format as their values, so the bytes on the
wire, the rows in the database and the strings in the tools are the same as with plain strings.
orjson writes a member used as a value as its value, but refuses one used as a dict key: keys
are written as `Reply.x.value`.
"""

from __future__ import annotations

from enum import Enum


class Name(str, Enum):
    """A `str` enum that behaves as its value in comparisons, hashing, `str()` and formatting."""

    __hash__ = str.__hash__
    __format__ = str.__format__  # type: ignore[assignment]  # format as the value, not the member

    def __str__(self) -> str:
        return str.__str__(self)


class Status(Name):
    """The fixed set of evaluation outcomes. Exactly one ends every evaluation."""

    correct = "correct"
    wrong_output = "wrong_output"
    shape_mismatch = "shape_mismatch"
    nan_output = "nan_output"
    syntax_error = "syntax_error"
    import_error = "import_error"
    compile_error = "compile_error"
    runtime_error = "runtime_error"
    cuda_error = "cuda_error"
    timeout = "timeout"
    oom = "oom"
    no_triton_kernel = "no_triton_kernel"
    cheat_detected = "cheat_detected"
    infra_error = "infra_error"

    @property
    def loads(self) -> bool:
        """True when the candidate module loaded and ran (it may still be wrong)."""
        return self in (Status.correct, Status.wrong_output, Status.shape_mismatch, Status.nan_output)


PENDING = "pending"
"""How tools and summaries name a node whose evaluation has not ended (its stored status is NULL)."""

REFERENCE = "reference"
"""The status of a tree's root: the task's reference module, not a kernel."""

WRONG_RESULTS = frozenset({Status.wrong_output, Status.shape_mismatch, Status.nan_output})
"""The candidate ran to its end and its outputs are wrong."""

FAILED_AFTER_LOADING = frozenset({Status.compile_error, Status.runtime_error, Status.cuda_error, Status.timeout,
                                  Status.oom})
"""The candidate's module loaded, then its kernel failed."""


class Action(Name):
    """How a node of the search tree was made."""

    root = "root"  # the task's reference module
    large = "large"  # a structural regeneration, seeing strong kernels from the whole tree
    small = "small"  # a local refinement of the parent, seeing its branch's recent history


class Severity(Name):
    """How much a static-check finding weighs: an error rejects the candidate, a warning is advice."""

    error = "error"
    warning = "warning"


class Kind(Name):
    """Frame kinds a worker reports (harness -> trusted evaluator)."""

    trial = "trial"  # one correctness trial's outputs
    inputs = "inputs"  # the reference's inputs (degenerate-task checks)
    repeat = "repeat"  # the reference run again on the same inputs
    ops = "ops"  # PyTorch operations seen, launches, flags reset
    check = "check"  # the reference's outputs on the timing inputs
    device = "device"  # device name and library versions
    error = "error"  # an exception, classified
    infra = "infra"  # a failure of ours, not the candidate's
    violation = "violation"  # the candidate broke a rule while running
    done = "done"  # the job ran to its end (always last)
    compiled = "compiled"  # a candidate's compiled kernels (its own Triton cache), for its timing jobs
    checked = "checked"  # the correctness trials are over; this process goes on to time the candidate
    timing = "timing"  # timing samples and the check run's outputs
    peaks = "peaks"  # device peaks (profile job)
    floor = "floor"  # the task's floor (profile job)
    notes = "notes"  # profile notes
    kernels = "kernels"  # per-kernel profiler rows (profile job)
    triton = "triton"  # Triton launch metadata (profile job)
    footprint = "footprint"  # the reference job's memory, counted on the meta device (footprint job)
    piece = "piece"  # the next piece of a ring frame's outputs lies in a slot of the job's ring
    launched = "launched"  # the first forward returned on the host: its kernels are compiled and launched
    unlaunched = "unlaunched"  # a candidate's outputs for trial 0's inputs with every Triton launch skipped


class Job(Name):
    """Job kinds (trusted evaluator -> worker, inside a run request)."""

    reference = "reference"
    candidate = "candidate"
    timing = "timing"
    profile = "profile"
    footprint = "footprint"  # count a reference job's memory without running it on the device


class Phase(Name):
    """Where a worker job's time goes, in seconds (its last report's `"phases"`)."""

    start = "start_s"  # from the fork to the job's code: the sandbox, imports
    cuda = "cuda_s"  # the CUDA context
    load = "load_s"  # task and candidate modules loaded, model built
    inputs = "inputs_s"  # inputs made
    first = "first_s"  # the first forward: kernels compiled (and tuned, under load)
    forward = "forward_s"  # the other forwards of the correctness trials
    retune = "retune_s"  # autotuners tuning again on the quiet GPU (timing)
    timed = "timed_s"  # the timed runs
    compile = "compile_s"  # Triton compiling (within the phases above), running through others' measurements
    held = "held_s"  # after a compile, waiting for another job's measurement to end
    send = "send_s"  # reports and outputs sent, at the pace the evaluator reads them


class Op(Name):
    """Control requests (pool -> warm parent)."""

    run = "run"  # fork a worker for a job; its result pipe travels with the request
    go = "go"  # open a gated job's timing gate
    pause = "pause"  # stop every job's processes but one
    resume = "resume"  # let paused jobs run on
    kill = "kill"  # kill a job's process group
    stall = "stall"  # (re)start or clear a job's stall clock: it must report again within so many seconds
    exit = "exit"  # shut the warm parent down


class Reply(Name):
    """Keys (and the gate's value) of the warm parent's replies (warm parent -> pool)."""

    ready = "ready"  # the warm parent is up; also the value of `gate` when a job waits at its gate
    paused = "paused"  # a pause took effect (its value is the request's token)
    finished = "finished"  # a job's process ended (with how)
    gate = "gate"  # a gated job is ready to measure


class JudgeOp(Name):
    """Requests to the judge, the process that holds reference outputs (trusted evaluator -> judge)."""

    begin = "begin"  # start receiving a set of outputs: kept as a reference, or compared with one
    chunk = "chunk"  # a piece of one output's bytes
    end = "end"  # the set is complete: store it, or answer the comparison
    abort = "abort"  # forget a set being received
    flags = "flags"  # degenerate-output checks of a stored reference
    drop = "drop"  # forget a stored reference
    stats = "stats"  # what the judge holds
    ring_open = "ring_open"  # make a job's ring (its memory and credit pipe travel back on the fd channel)
    piece = "piece"  # a piece of one output lies in a ring slot: take it (or skip it), then hand the slot back
    ring_close = "ring_close"  # the job is over: free its ring
