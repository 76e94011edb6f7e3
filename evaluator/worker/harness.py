"""What runs inside one forked worker process: load, run trials, time, report facts.

A worker reports facts (outputs, launch counts, ops, replaced functions, exceptions) as
messages on a pipe; it decides nothing. The trusted parent compares and gives the verdict.
Reference jobs never load candidate code.
"""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import io
import linecache
import os
import sys
import tarfile
import time
import traceback
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ...common.vocab import Phase
from ..messages import COMPILED_MAX_BYTES
from ..results import EvalProtocol, Status
from ..sandbox import wire
from ..sandbox.ring import RING_KINDS, RingWriter
from ..sandbox.sealed_cache import pack_tree
from . import autotune_ties, guards

CANDIDATE_FILE = "candidate.py"
TASK_FILENAME = "<reference task>"
TIMING_VARIANTS = 2  # input sets rotated during timing, so a cache keyed on inputs goes stale
CHECK_RUN = 1_000_003  # index of the run after timing whose output is verified


class Reporter:
    """Writes the harness's messages; each carries the job's nonce, which the parent checks.

    `gate` is this job's end of the timing gate: `wait_for_gpu` says "ready" on it and blocks
    until the evaluator holds the GPU for this process. Without a gate it returns at once.
    """

    def __init__(self, fd: int, nonce: str | None = None, gate: int | None = None,
                 ring: RingWriter | None = None) -> None:
        self.fd = fd
        self.nonce = nonce
        self.gate = gate
        self.ring = ring  # where outputs go when the job has a ring (see sandbox.ring)
        self.send_s = 0.0  # time spent sending (outputs leave at the pace the evaluator reads them)
        # Where the job's time went, by phase: a diagnostic for the evaluator's trace, never a
        # fact a verdict rests on (candidate code runs in this process and could change it).
        self.phases: dict[str, float] = {}

    @contextmanager
    def lap(self, phase: str) -> Iterator[None]:
        """Count the time the block takes toward `phase` (seconds, summed over calls)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.phases[phase] = self.phases.get(phase, 0.0) + time.perf_counter() - started

    def phase_report(self) -> dict[str, float]:
        """The phases so far, with the time spent sending, for a job's last report."""
        return {str(k): round(v, 3) for k, v in {**self.phases, Phase.send.value: self.send_s}.items()}

    def send(self, header: dict, tensors: list[torch.Tensor] | None = None) -> None:
        started = time.perf_counter()
        try:
            self._send(header, tensors)
        finally:
            self.send_s += time.perf_counter() - started

    def _send(self, header: dict, tensors: list[torch.Tensor] | None) -> None:
        if self.nonce is not None:
            header = {**header, "nonce": self.nonce}
        if tensors and self.ring is not None and header.get("kind") in RING_KINDS:
            self.ring.write(self.fd, header, list(tensors))
        else:
            wire.write_tensors(self.fd, header, list(tensors or []))

    def wait_for_gpu(self) -> None:
        if self.gate is None:
            return
        os.write(self.gate, b"r")
        if not os.read(self.gate, 1):  # the warm parent is gone: nobody will ever say go
            os._exit(75)


# --- seeds -----------------------------------------------------------------------------

def trial_seed(protocol: EvalProtocol, trial: int) -> int:
    return protocol.seed * 7919 + 1 + trial


def timing_seed(protocol: EvalProtocol, variant: int) -> int:
    return protocol.seed * 7919 + 100_000 + variant


# --- loading ---------------------------------------------------------------------------

def load_task(source: str) -> types.ModuleType:
    """Execute the reference task into a module that is not importable by name."""
    module = types.ModuleType("reference_task")
    module.__file__ = TASK_FILENAME
    linecache.cache[TASK_FILENAME] = (len(source), None, source.splitlines(True), TASK_FILENAME)
    exec(compile(source, TASK_FILENAME, "exec"), module.__dict__)
    return module


# --- compiled kernels, handed from a candidate's correctness job to its timing jobs ----------------

def own_cache(scratch: str) -> str | None:
    """This job's Triton cache when it is its own (inside its scratch, as the full sandbox makes
    it); None when the cache is shared with other jobs (nothing to hand on, nothing to fill)."""
    cache = os.environ.get("TRITON_CACHE_DIR")
    if not cache or not scratch:
        return None
    cache, scratch = os.path.realpath(cache), os.path.realpath(scratch)
    return cache if cache.startswith(scratch + os.sep) else None


def pack_compiled(scratch: str, limit: int = COMPILED_MAX_BYTES) -> bytes | None:
    """The job's own Triton cache as one uncompressed tar of its regular files, or None when the
    cache is not its own, is empty, or would exceed `limit` bytes."""
    cache = own_cache(scratch)
    return pack_tree(cache, limit) if cache is not None else None


def unpack_compiled(blob: bytes, scratch: str) -> bool:
    """Fill the job's own Triton cache from `pack_compiled`'s tar: files and folders only, nothing
    outside the cache (tarfile's "data" filter refuses links, devices, absolute and parent
    paths). Whether anything was written; a tar it refuses leaves the kernels to compile anew."""
    cache = own_cache(scratch)
    if cache is None or len(blob) > COMPILED_MAX_BYTES:
        return False
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:") as tar:
            members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
            tar.extractall(cache, members=members, filter="data")
    except (tarfile.TarError, OSError, ValueError):
        return False
    return bool(members)


def seed_sealed(blob: bytes, digest: str, scratch: str) -> bool:
    """Fill the job's own Triton cache with the trusted side's sealed build (`sealed_cache`), before
    any candidate code runs, and only if the tar is the one that side sealed (its SHA-256)."""
    if hashlib.sha256(blob).hexdigest() != digest:
        return False
    return unpack_compiled(blob, scratch)


def load_candidate(source: str, scratch: str) -> types.ModuleType:
    """Import the candidate from a real file (Triton's JIT reads kernel source from disk)."""
    autotune_ties.install()
    path = os.path.join(scratch, CANDIDATE_FILE)
    with open(path, "w") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location("candidate", path)
    assert spec is not None and spec.loader is not None  # a .py path always has a source loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    spec.loader.exec_module(module)
    return module


def autotuners(module: types.ModuleType) -> list:
    """The Triton autotuners of a module: among its globals (also under @triton.heuristics), and
    any other defined in its code (inside a class or a function, made on first use)."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # pragma: no cover - a Triton without autotuning
        return []
    found = []
    for obj in list(vars(module).values()):
        for _ in range(8):  # decorators wrap each other through `.fn`
            if isinstance(obj, Autotuner) and obj not in found:
                found.append(obj)
            obj = getattr(obj, "fn", None)
            if obj is None:
                break
    seen = {id(t) for t in found}
    for obj in gc.get_objects():  # type(), not isinstance: no object's __class__ is asked
        if issubclass(type(obj), Autotuner) and id(obj) not in seen \
                and getattr(getattr(obj, "base_fn", None), "__globals__", None) is vars(module):
            found.append(obj)
    return found


def make_inputs(task: types.ModuleType, seed: int, device: torch.device) -> list:
    """The task's inputs for one seed, on `device`.

    On a GPU, `get_inputs` runs with the GPU as the default device: its generator makes a
    gigabyte of random inputs in milliseconds where the CPU's takes seconds, which dominated
    registering large tasks. The values differ from a CPU-made draw but are the same in every
    process (same seed, same generator), which is all a comparison needs. A `get_inputs` that
    cannot run there runs on the CPU, and its inputs are moved.
    """
    raw: list | None = None
    if device.type == "cuda":
        torch.manual_seed(seed)
        try:
            with torch.device(device):
                raw = list(task.get_inputs())
        except Exception:  # noqa: BLE001 - e.g. a get_inputs that goes through NumPy
            raw = None
    if raw is None:
        torch.manual_seed(seed)
        raw = list(task.get_inputs())
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in raw]


def build_model(cls, task: types.ModuleType, protocol: EvalProtocol, device: torch.device):
    init = list(task.get_init_inputs())
    torch.manual_seed(protocol.seed)
    model = cls(*init)
    if isinstance(model, torch.nn.Module):
        model = model.to(device)
    return model


def as_outputs(result) -> list:
    """Normalize a forward's return value to a list (a tuple or list stays a list)."""
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


# --- classification --------------------------------------------------------------------

def _compile_error_types() -> tuple[type, ...]:
    found: list[type] = []
    try:
        from triton.compiler import errors as terrors

        for name in dir(terrors):
            obj = getattr(terrors, name)
            if isinstance(obj, type) and issubclass(obj, Exception) and "Compil" in name or name in (
                    "UnsupportedLanguageConstruct", "CompileTimeAssertionFailure"):
                found.append(obj)
    except ImportError:  # pragma: no cover
        pass
    return tuple(found)


_COMPILE_ERRORS = _compile_error_types()
_KERNEL_COMPILE_CAUSES = (TypeError, AttributeError, NameError, ValueError, AssertionError)
# Out of memory as the libraries say it: cuDNN and cuBLAS fail to allocate their workspaces
# with errors of their own (seen beside other jobs on a full device).
_MEMORY_MARKERS = ("out of memory", "can't allocate memory", "Cannot allocate memory", "DEVICE_ALLOCATION_FAILED",
                   "CUDNN_STATUS_ALLOC_FAILED", "CUBLAS_STATUS_ALLOC_FAILED")
_CUDA_MARKERS = ("CUDA error", "illegal memory access", "device-side assert", "cudaError", "CUDA driver error",
                 "misaligned address", "an illegal instruction")


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "") not in ("", "0")


def classify(exc: BaseException, phase: str) -> Status:
    """Map an exception raised while loading or running a candidate to a status."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError" or any(
            m in text for m in _MEMORY_MARKERS):
        return Status.oom
    if _COMPILE_ERRORS and isinstance(exc, _COMPILE_ERRORS):
        return Status.compile_error
    if any(m in text for m in _CUDA_MARKERS) or type(exc).__name__ == "AcceleratorError":
        return Status.cuda_error
    if phase == "import":
        return Status.import_error
    cause = exc.__cause__
    if type(exc).__name__ == "InterpreterError" and isinstance(cause, _KERNEL_COMPILE_CAUSES):
        # The interpreter wraps every error raised in a kernel body; these would not compile.
        return Status.compile_error
    if _interpreting() and _raised_in_triton_language(exc):
        # Under the interpreter a kernel that would not compile fails inside triton.language.
        return Status.compile_error
    return Status.runtime_error


def _raised_in_triton_language(exc: BaseException) -> bool:
    tb = exc.__traceback__
    last = None
    passed_kernel = False
    while tb is not None:
        fname = tb.tb_frame.f_code.co_filename
        if fname.endswith(CANDIDATE_FILE) and _frame_in_kernel(tb.tb_frame):
            passed_kernel = True
        last = fname
        tb = tb.tb_next
    if not passed_kernel or last is None:
        return False
    sep = os.sep
    return f"{sep}triton{sep}language{sep}" in last or f"{sep}triton{sep}runtime{sep}interpreter" in last


def _frame_in_kernel(frame) -> bool:
    fn = frame.f_globals.get(frame.f_code.co_name)
    return fn is not None and type(fn).__name__ in ("JITFunction", "InterpretedFunction")


def _candidate_line(exc: BaseException, source_lines: list[str]) -> int | None:
    """The line of the candidate's own file the error points at (not harness frames)."""
    line = None
    jit_fn = None
    for tb in _tracebacks(exc):
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.endswith(CANDIDATE_FILE):
                line = tb.tb_lineno
            for value in (tb.tb_frame.f_locals.get("self"), tb.tb_frame.f_locals.get("fn")):
                if hasattr(value, "def_file_line_number") or hasattr(value, "starting_line_number"):
                    jit_fn = value
            tb = tb.tb_next
    if isinstance(exc, SyntaxError) and exc.filename and exc.filename.endswith(CANDIDATE_FILE):
        return exc.lineno
    node = getattr(exc, "node", None)
    src = getattr(exc, "src", None)
    if _COMPILE_ERRORS and isinstance(exc, _COMPILE_ERRORS) and node is not None and isinstance(src, str):
        # The error's line is relative to the kernel's own source, whose first line differs
        # across Triton versions (decorator or def): find that line's text in the file instead.
        rel = getattr(node, "lineno", None)
        src_lines = src.split("\n")
        if rel and 1 <= rel <= len(src_lines) and src_lines[rel - 1].strip():
            wanted = src_lines[rel - 1].strip()
            start = getattr(jit_fn, "starting_line_number", None) or 1
            hits = [k for k, text in enumerate(source_lines, start=1) if text.strip() == wanted]
            after = [k for k in hits if k >= start]
            if after or hits:
                return (after or hits)[0]
    return line


def _arange_bounds(exc: BaseException) -> tuple[int, int] | None:
    """(start, end) of the tl.arange call that failed, read from Triton's own frame in the traceback."""
    for tb in _tracebacks(exc):
        while tb is not None:
            frame = tb.tb_frame
            if frame.f_code.co_name == "arange" and f"{os.sep}triton{os.sep}" in frame.f_code.co_filename:
                start, end = frame.f_locals.get("start"), frame.f_locals.get("end")
                if type(start) is int and type(end) is int:
                    return start, end
            tb = tb.tb_next
    return None


def _tracebacks(exc: BaseException) -> list:
    """The exception's traceback, then its causes' (the innermost line wins)."""
    out, seen = [], set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out.append(cur.__traceback__)
        cur = cur.__cause__
    return out


def error_info(exc: BaseException, source: str | None, limit: int = 600) -> dict:
    lines = source.splitlines() if source else []
    line = _candidate_line(exc, lines) if source is not None else None
    message = str(exc).strip() or repr(exc)
    if len(message) > limit:
        message = message[: limit // 2] + " ... " + message[-limit // 2:]
    bounds = _arange_bounds(exc)
    if bounds is not None:  # Triton names no value; the failing call's own arguments do
        message += f" (here tl.arange({bounds[0]}, {bounds[1]}): a range of {bounds[1] - bounds[0]})"
    info: dict[str, Any] = {"error_class": type(exc).__name__, "message": message}
    if line and 1 <= line <= len(lines):
        info["line"] = line
        info["source_line"] = lines[line - 1][:200]
    if source is None:  # a reference failure: keep the trace, the task author needs it
        info["message"] = (message + "\n" + "".join(traceback.format_exception(exc)[-3:]))[-limit:]
    return info


# --- checks on returned values -------------------------------------------------------------

def _storages(tensors) -> set[int]:
    out = set()
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.numel():
            out.add(t.untyped_storage().data_ptr())
    return out


def output_violation(outputs: list, inputs: list) -> str | None:
    """Reason the outputs are not plain tensors with storage of their own, or None."""
    input_storages = _storages(inputs)
    for i, o in enumerate(outputs):
        if type(o) is not torch.Tensor:
            return f"output {i} is a {type(o).__module__}.{type(o).__qualname__}, not a plain torch.Tensor"
        if o.numel() and o.untyped_storage().data_ptr() in input_storages:
            return f"output {i} shares storage with an input tensor (a view of or a write into the input)"
    return None


def inputs_changed(before: list, after: list) -> bool:
    equal = guards._ORIGINALS["torch.equal"]
    for b, a in zip(before, after):
        if isinstance(b, torch.Tensor) and not equal(b, a):
            return True
    return False


def snapshot_inputs(inputs: list) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


# --- our own failures ---------------------------------------------------------------------

def _triton_cache_dir() -> str | None:
    path = os.environ.get("TRITON_CACHE_DIR")
    if path:
        return os.path.realpath(path)
    try:
        from triton.runtime.cache import default_cache_dir

        return os.path.realpath(default_cache_dir())
    except (ImportError, OSError):  # pragma: no cover - older Triton
        return None


def _under(path, root: str | None) -> bool:
    if not root or not path:
        return False
    try:
        return os.path.realpath(os.fsdecode(path)).startswith(root.rstrip(os.sep) + os.sep)
    except (TypeError, ValueError):
        return False


def cache_race(exc: BaseException) -> bool:
    """True for a file error inside the shared Triton cache (another process compiling the same kernel).

    Such errors come from the cache's files appearing, vanishing or being half-written while
    several workers compile one kernel; they are never the candidate's fault.
    """
    root = _triton_cache_dir()
    seen = 0
    e: BaseException | None = exc
    while e is not None and seen < 8:
        seen += 1
        if isinstance(e, OSError) and (_under(e.filename, root) or _under(getattr(e, "filename2", None), root)):
            return True
        if isinstance(e, (OSError, ValueError, EOFError)):
            tb = e.__traceback__
            while tb is not None:
                name = tb.tb_frame.f_code.co_filename.replace(os.sep, "/")
                if name.endswith("triton/runtime/cache.py"):
                    return True
                tb = tb.tb_next
        e = e.__cause__ or e.__context__
    return False
