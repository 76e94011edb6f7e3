"""The warm parent: imports torch and Triton once, then forks one process per job.

Run as `python -m adaexplore.evaluator.zygote`. It reads job requests on stdin and writes
results on stdout (length-prefixed frames, see `wire`). It never initializes CUDA, so each
forked child can. It is single-threaded on purpose: forking a threaded process is unsafe.
Each child gets its own process group, scratch directory, scrubbed environment and
redirected stdout/stderr; a hard deadline kills the whole group.
"""

from __future__ import annotations

import ctypes
import os
import resource
import selectors
import shutil
import signal
import sys
import tempfile
import time

KEEP_ENV = ("PATH", "TRITON_INTERPRET", "TRITON_CACHE_DIR", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
            "CUDA_HOME", "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH", "NCCL_NVLS_ENABLE",
            "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "OMP_NUM_THREADS")
OUTPUT_FILE = "output.txt"
OUTPUT_TAIL = 2000
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux only)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


class Child:
    def __init__(self, job_id: str, pid: int, fd: int, deadline: float, scratch: str) -> None:
        self.job_id, self.pid, self.fd, self.deadline, self.scratch = job_id, pid, fd, deadline, scratch
        self.started = time.monotonic()
        self.chunks: list[bytes] = []
        self.size = 0
        self.timed_out = False
        self.overflow = False
        self.status: int | None = None


class Zygote:
    def __init__(self, ctrl_in: int, ctrl_out: int, max_result_bytes: int) -> None:
        self.ctrl_in, self.ctrl_out = ctrl_in, ctrl_out
        self.max_result = max_result_bytes
        self.sel = selectors.DefaultSelector()
        self.sel.register(ctrl_in, selectors.EVENT_READ, None)
        self.children: dict[int, Child] = {}
        self.inbuf = b""
        self.running = True

    # --- control channel ------------------------------------------------------------
    def _read_ctrl(self) -> None:
        from . import wire

        data = os.read(self.ctrl_in, 1 << 20)
        if not data:
            self.running = False
            return
        self.inbuf += data
        while len(self.inbuf) >= 8:
            n = int.from_bytes(self.inbuf[:8], "little")
            if len(self.inbuf) < 8 + n:
                break
            body, self.inbuf = self.inbuf[8:8 + n], self.inbuf[8 + n:]
            head, _ = wire.unpack(body)
            if head.get("op") == "run":
                self._spawn(head["job_id"], head["job"], float(head["timeout_s"]))
            elif head.get("op") == "ping":
                self._reply({"job_id": head.get("job_id"), "pong": True, "pid": os.getpid()}, b"")
            elif head.get("op") == "exit":
                self.running = False

    def _reply(self, head: dict, payload: bytes) -> None:
        from . import wire

        wire.write_frame(self.ctrl_out, wire.pack(head, [payload]))

    # --- children -------------------------------------------------------------------
    def _spawn(self, job_id: str, job: dict, timeout_s: float) -> None:
        scratch = tempfile.mkdtemp(prefix="cand-", dir=job.get("work_dir") or None)
        job = {**job, "scratch": scratch}
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            os.close(r)
            self._become_worker(job, w, scratch)
        os.close(w)
        os.set_blocking(r, False)
        child = Child(job_id, pid, r, time.monotonic() + timeout_s, scratch)
        self.children[r] = child
        self.sel.register(r, selectors.EVENT_READ, child)

    def _become_worker(self, job: dict, w: int, scratch: str) -> None:
        code = 70
        try:
            os.setsid()
            die_with_parent()
            for fd in [self.ctrl_in, self.ctrl_out, *self.children]:
                try:
                    os.close(fd)
                except OSError:
                    pass
            os.chdir(scratch)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            out = os.open(os.path.join(scratch, OUTPUT_FILE), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, 1)
            os.dup2(out, 2)
            env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
            env.update(HOME=scratch, TMPDIR=scratch)
            os.environ.clear()
            os.environ.update(env)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if job.get("memory_limit_bytes"):
                lim = int(job["memory_limit_bytes"])
                resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
            from . import jobs
            from . import profile as profiling
            from .harness import Reporter

            runner = {"reference": jobs.run_reference, "candidate": jobs.run_candidate,
                      "timing": jobs.run_timing, "profile": profiling.run_profile}[job["kind"]]
            runner(job, Reporter(w, job.get("nonce")))
            code = 0
        except BaseException:  # noqa: BLE001 - the parent reads the exit code
            import traceback

            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)

    def _drain(self, child: Child) -> bool:
        """Read what is available; True at end of stream."""
        while True:
            try:
                data = os.read(child.fd, 1 << 20)
            except BlockingIOError:
                return False
            except OSError:
                return True
            if not data:
                return True
            child.size += len(data)
            if child.size > self.max_result:
                child.overflow = True
                child.chunks = []
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            elif not child.overflow:
                child.chunks.append(data)

    def _reap(self, child: Child, block: bool) -> bool:
        if child.status is not None:
            return True
        try:
            pid, status = os.waitpid(child.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            child.status = 0
            return True
        if pid == 0:
            return False
        child.status = status
        return True

    def _finish(self, child: Child) -> None:
        self.sel.unregister(child.fd)
        os.close(child.fd)
        del self.children[child.fd]
        try:  # whatever the candidate left running in its group goes too
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._reap(child, block=True)
        status = child.status or 0
        tail = ""
        try:
            with open(os.path.join(child.scratch, OUTPUT_FILE), "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - OUTPUT_TAIL))
                tail = fh.read().decode("utf-8", "replace")
        except OSError:
            pass
        shutil.rmtree(child.scratch, ignore_errors=True)
        head = {
            "job_id": child.job_id,
            "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "timed_out": child.timed_out,
            "overflow": child.overflow,
            "elapsed_s": time.monotonic() - child.started,
            "output_tail": tail,
        }
        self._reply(head, b"".join(child.chunks))

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for child in list(self.children.values()):
            if not child.timed_out and now > child.deadline:
                child.timed_out = True
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            # A child that exited while a grandchild holds its pipe open still finishes.
            if self._reap(child, block=False):
                self._drain(child)
                self._finish(child)

    def serve(self) -> None:
        while self.running:
            for key, _ in self.sel.select(timeout=0.05):
                if key.data is None:
                    self._read_ctrl()
                else:
                    child: Child = key.data
                    if self._drain(child):
                        self._finish(child)
            self._check_deadlines()
        for child in list(self.children.values()):
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            shutil.rmtree(child.scratch, ignore_errors=True)


def main() -> None:
    die_with_parent()
    ctrl_out = os.dup(1)
    os.dup2(2, 1)  # stray prints from imports must not corrupt the protocol
    import torch  # noqa: F401 - the point of this process is to have these imported
    import triton  # noqa: F401
    import triton.language  # noqa: F401
    import triton.runtime.interpreter  # noqa: F401
    import torch.utils._python_dispatch  # noqa: F401
    import torch.testing  # noqa: F401
    import torch._dynamo  # noqa: F401 - pulled in lazily by dispatch modes; costs seconds per child otherwise
    try:
        import numpy  # noqa: F401
    except ImportError:
        pass

    from . import jobs  # noqa: F401 - binds the harness's originals before any candidate exists
    from . import profile  # noqa: F401 - the profile job's module
    import torch.utils.flop_counter  # noqa: F401

    max_result = int(os.environ.get("ADAEXPLORE_MAX_RESULT_BYTES", str(1 << 30)))
    zygote = Zygote(0, ctrl_out, max_result)
    from . import wire

    wire.write_frame(ctrl_out, wire.pack({"ready": True, "pid": os.getpid()}, [b""]))
    zygote.serve()


if __name__ == "__main__":
    main()
