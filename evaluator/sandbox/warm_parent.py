"""The warm parent: imports torch and Triton once, then forks one process per job.

Runs in its own process, started as `python -P -m adaexplore.evaluator.worker.warm_start FD`: the
worker package owns the job table (what a child runs for each kind of job) and hands it to `main`,
so nothing here imports the worker or the profile. FD is one end of a Unix socket to the evaluator, with an environment the evaluator allow-listed. Each job request arrives on it
as a few lifecycle settings with descriptors attached (file descriptor passing): the write ends
of the job's result and output pipes, and a sealed memfd holding the job itself (task and
candidate source, nonce). Only the forked child reads that memfd, so this process, whose memory
every later job inherits, never holds a caller's source, nonce or output; the child writes its
results and its stdout/stderr straight into the pipes, which the evaluator reads. This process
only manages lives: it answers with each child's exit status, enforces deadlines, stops a job that
takes the machine's file table, relays the timing gate
(a child that is ready to measure waits until the evaluator holds the GPU for it), and
pauses the other children while one measures (their deadlines stand still meanwhile), but for
those compiling Triton kernels, which go on and wait on their own before any GPU work
(`compile_mark`).

It never initializes CUDA, so each forked child can. It is single-threaded on purpose:
forking a threaded process is unsafe. Each child gets its own process group, a pids, a memory
and a cpu cgroup, a scrubbed environment and stdout/stderr on its output pipe, and then enters the
sandbox (`confine.py`: namespaces, an allow-listed read-only view, an unprivileged uid, no
capabilities, seccomp, limits) before any task or candidate code runs; a hard deadline kills
the whole group.
"""

from __future__ import annotations

import collections
import math
import os
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable

from ...common.vocab import Op, Reply
from . import confine
from .cgroups import JobCgroups
from .compile_mark import CompileMark
from .device_watch import DeviceWatch, Overdraw, open_reader
from .procs import adopt_orphans, children_of, die_with_parent, file_table, files_held, until_stopped
from .stall import StallClock

# What a forked child runs once it is confined: (job, result fd, gate fd, compile mark, fork time).
RunJob = Callable[[dict, int, "int | None", CompileMark, float], None]

KEEP_ENV = ("PATH", "TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
            "CUDA_HOME", "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH", "NCCL_NVLS_ENABLE",
            "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "OMP_NUM_THREADS")
PAUSE_CONFIRM_S = 0.5
# A pause waits at most this long for jobs whose stall limit ran out while they were stopped: they
# run their grace first, so a stuck one ends before the measurement instead of lingering through
# every later one (see `sandbox.stall`). Below the pool's wait for the pause's confirmation.
PAUSE_DEFER_S = 3.0
SWEEP_EVERY_S = 1.0  # how often orphans that candidates left behind are looked for
FILE_TABLE_ALARM = 0.5  # the machine's open files, as a share of its most, at which jobs are counted
FILE_TABLE_SHARE = 0.1  # a job holding this share of the machine's most then is stopped


class Child:
    def __init__(self, job_id: str, pid: int, timeout_s: float, scratch: str | None, gate: socket.socket | None,
                 pidfd: int | None, cgroup: list[str] | None = None, setup_fd: int | None = None,
                 mark: CompileMark | None = None) -> None:
        self.job_id, self.pid, self.timeout_s, self.scratch = job_id, pid, timeout_s, scratch
        self.cgroup, self.setup_fd, self.mark = cgroup, setup_fd, mark
        self.held_since: float | None = None  # left running (compiling) through a measurement since
        self.killed_for: str | None = None  # why this side killed it, if it did
        self.gate, self.pidfd = gate, pidfd
        self.started = time.monotonic()
        self.deadline = self.started + timeout_s
        self.timed_out = False
        self.ready = False
        self.status: int | None = None
        self.paused_left: float | None = None  # time left on its deadline while it is paused
        self.stall = StallClock()  # armed by the evaluator once its kernels are compiled
        self.stalled = False
        self.device_share = 0  # bytes of the device it may hold while the device runs short (0: no share)
        self.overdraw: Overdraw | None = None  # stopped for holding more than its share
        self.pressure = False  # alive while the device ran short: a failure may not be its own


class WarmParent:
    def __init__(self, ctrl: socket.socket, level: str, limits: JobCgroups, run_job: RunJob) -> None:
        self.ctrl = ctrl
        self.run_job = run_job  # the worker's job table (`worker.warm_start`): the sandbox runs no job itself
        self.level, self.limits = level, limits
        self.stale_cgroups: list[list[str]] = []
        self.sel = selectors.DefaultSelector()
        self.sel.register(ctrl, selectors.EVENT_READ, None)
        self.children: dict[str, Child] = {}
        self.fds: collections.deque[int] = collections.deque()  # result pipes, in request order
        self.inbuf = bytearray()  # grows in place: a request with a blob arrives in many pieces
        self.running = True
        self.pending_pause: tuple[str | None, object, float] | None = None  # (keep, token, asked at)
        self.orphans: set[int] = set()  # killed, not yet reaped
        self.next_sweep = 0.0
        # NVML's view of the GPU, where jobs use one (never CUDA itself: the children init it).
        reader = None if os.environ.get("TRITON_INTERPRET") == "1" else open_reader()
        self.watch = DeviceWatch(reader) if reader is not None else None

    # --- control channel ------------------------------------------------------------
    def _read_ctrl(self) -> None:
        from . import wire

        try:
            data, fds, _flags, _addr = socket.recv_fds(self.ctrl, 1 << 20, 64)
        except OSError:
            data, fds = b"", []
        self.fds.extend(fds)
        if not data:
            self.running = False
            return
        self.inbuf += data
        while len(self.inbuf) >= 8:
            n = int.from_bytes(self.inbuf[:8], "little")
            if len(self.inbuf) < 8 + n:
                break
            body = self.inbuf[8:8 + n]  # a copy: the buffer moves on below
            del self.inbuf[:8 + n]
            head, blobs = wire.unpack(body)
            op = head.get("op")
            if op == Op.run:
                # Every run request was sent with its result pipe, output pipe and job memfd (and,
                # for a job with a ring, the ring's memory and credit pipe), which arrive with its first byte.
                fds = [self.fds.popleft() for _ in range(max(3, int(head.get("fds") or 3)))]
                self._spawn(head["job_id"], dict(head.get("job") or {}), float(head["timeout_s"]), fds)
            elif op == Op.go:
                # a missing id finds no child
                self._open_gate(self.children.get(head.get("job_id")))  # type: ignore[arg-type]
            elif op == Op.pause:
                self.pending_pause = (head.get("keep"), head.get("token"), time.monotonic())
                self._pause_when_due()
            elif op == Op.resume:
                self.pending_pause = None  # its asker stopped waiting for it
                self._resume()
            elif op == Op.stall:
                child = self.children.get(head.get("job_id"))  # type: ignore[arg-type]  # a missing id finds no child
                if child is not None and child.status is None:
                    seconds = head.get("seconds")
                    child.stall.arm(float(seconds) if isinstance(seconds, (int, float)) else None,
                                    str(head.get("note") or "")[:300], time.monotonic())
            elif op == Op.kill:
                child = self.children.get(head.get("job_id"))  # type: ignore[arg-type]  # a missing id finds no child
                if child is not None:
                    child.killed_for = str(head.get("reason") or "the evaluator stopped it")[:300]
                    self._kill(child)
            elif op == Op.exit:
                self.running = False

    def _reply(self, head: dict) -> None:
        from . import wire

        self.ctrl.sendall(wire.pack(head))

    # --- children -------------------------------------------------------------------
    def _spawn(self, job_id: str, ctl: dict, timeout_s: float, fds: list[int]) -> None:
        """Fork the job's process. `ctl` holds only what this process needs to run it (gate, sandbox
        plan, memory); the job itself is in the memfd `fds[2]`, which only the child reads."""
        full = self.level == confine.LEVEL_FULL and (ctl.get("sandbox") or {}).get("level", self.level) == self.level
        # Only a worker without namespaces works in a host folder; a confined one works in its own /tmp.
        scratch = None if full else tempfile.mkdtemp(prefix="cand-", dir=ctl.get("work_dir") or None)
        gate = gate_child = None
        if ctl.get("gated"):
            gate, gate_child = socket.socketpair()
        cgroup = self.limits.create(job_id, int(ctl.get("host_memory_bytes") or 0) or None)
        # The child writes one byte here once it is confined, before any task or candidate code:
        # a child that ends without it failed to set up, which is ours, not the kernel's.
        setup_r, setup_w = os.pipe()
        mark = CompileMark()
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            os.close(setup_r)
            os.close(setup_w)
            mark.close()
            self.limits.remove(cgroup)
            for sock in (gate, gate_child):
                if sock is not None:
                    sock.close()
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            self._reply({"job_id": job_id, Reply.finished.value: True, "infra": f"cannot start a worker: {exc}"})
            return
        if pid == 0:  # child
            if gate is not None:
                gate.close()
            os.close(setup_r)
            self._become_worker(ctl, fds, scratch, keep=gate_child, cgroup=cgroup, setup=setup_w, mark=mark)
        for fd in fds:
            os.close(fd)
        os.close(setup_w)
        mark.forked(child=False)
        os.set_blocking(setup_r, False)
        pidfd = None
        try:  # readable the moment the child exits; otherwise the loop polls
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pass
        child = Child(job_id, pid, timeout_s, scratch, gate, pidfd, cgroup=cgroup, setup_fd=setup_r, mark=mark)
        child.device_share = max(0, int(ctl.get("device_bytes") or 0))
        self.children[job_id] = child
        if gate is not None:
            gate_child.close()  # type: ignore[union-attr]  # set for every child that has a gate
            gate.setblocking(False)
            self.sel.register(gate, selectors.EVENT_READ, ("gate", child))
        if pidfd is not None:
            self.sel.register(pidfd, selectors.EVENT_READ, ("exit", child))

    def _become_worker(self, ctl: dict, fds: list[int], scratch: str | None, keep: socket.socket | None,
                       cgroup: list[str] | None, setup: int, mark: CompileMark) -> None:
        code = 70
        forked_at = time.monotonic()
        try:
            os.setsid()
            die_with_parent()
            # Nothing of the parent's stays open here: not the control socket, not another
            # child's gate, not a result pipe meant for another job.
            self.sel.close()
            others = [self.ctrl.fileno(), *self.fds]
            for child in self.children.values():
                others += [c for c in (child.gate.fileno() if child.gate else None, child.pidfd, child.setup_fd)
                           if c is not None]
                if child.mark is not None:  # nor another child's mark: it could not vouch for that child
                    child.mark.close()
            for fd in others:
                try:
                    os.close(fd)
                except OSError:
                    pass
            mark.forked(child=True)
            result_fd, output_fd, job_fd, ring_fds = fds[0], fds[1], fds[2], fds[3:]
            job = read_job(job_fd)
            JobCgroups.join(cgroup)
            os.chdir(scratch or "/")
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(output_fd, 1)
            os.dup2(output_fd, 2)
            os.close(output_fd)
            plan = confine.Plan.from_job(job.get("sandbox") or {"level": self.level})
            if plan.level == confine.LEVEL_FULL and self.level != confine.LEVEL_FULL:
                plan.level = self.level
            excluded = [p for p in (ctl.get("work_dir"),) if p]
            workdir = confine.enter(plan, int(job.get("memory_limit_bytes") or 0) or None, excluded=excluded)
            os.write(setup, b"s")
            os.close(setup)
            job["scratch"] = workdir  # the job's files live inside its own view
            if job.get("gated") and keep is not None:
                job["gate_fd"] = keep.fileno()
            ring = job.get("ring")
            if ring and len(ring_fds) == 2:
                job["ring"] = {**ring, "fd": ring_fds[0], "credit_fd": ring_fds[1]}
            else:
                job["ring"] = None
            env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
            # No account of the host owns the sandbox's uid: libraries that ask who runs them read these.
            env.update(HOME=workdir, TMPDIR=workdir, USER="sandbox", LOGNAME="sandbox")
            if plan.level == confine.LEVEL_FULL:  # a cache of its own: nothing another job reads
                env["TRITON_CACHE_DIR"] = os.path.join(workdir, ".triton")
            elif ctl.get("triton_cache_dir"):  # no namespaces: the evaluator's, shared
                env["TRITON_CACHE_DIR"] = str(ctl["triton_cache_dir"])
            os.environ.clear()
            os.environ.update(env)
            if job.get("threads"):
                import torch

                torch.set_num_threads(int(job["threads"]))
            self.run_job(job, result_fd, keep.fileno() if keep else None, mark, forked_at)
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

    def _kill(self, child: Child) -> None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _pause(self, keep: str | None) -> None:
        """Stop every running child but `keep` (a timing is about to measure) and those compiling,
        which go on and wait on their own once done; the stopped children's clocks stop too."""
        now = time.monotonic()
        stopped = []
        for child in self.children.values():
            if child.job_id == keep or child.paused_left is not None or child.status is not None:
                continue
            child.stall.stop(now)  # paused, or held while it compiles: neither is its stalling
            if child.mark is not None and child.mark.hold():
                child.held_since = now
                continue
            try:
                os.killpg(child.pid, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                continue
            child.paused_left = child.deadline - now
            child.deadline = math.inf
            stopped.append(child.pid)
        # So nothing of theirs is still launching work when the measurement starts.
        until_stopped(stopped, PAUSE_CONFIRM_S)

    def _pause_when_due(self) -> None:
        """Carry out the pending pause once no job is running its grace (or PAUSE_DEFER_S has passed)."""
        if self.pending_pause is None:
            return
        keep, token, asked = self.pending_pause
        now = time.monotonic()
        owing = [c for c in self.children.values()
                 if c.job_id != keep and c.status is None and c.paused_left is None and c.stall.in_grace()]
        if owing and now - asked < PAUSE_DEFER_S:
            return
        self.pending_pause = None
        self._pause(keep)
        self._reply({Reply.paused.value: token})

    def _resume(self) -> None:
        now = time.monotonic()
        for child in self.children.values():
            if child.mark is not None:
                # A child left compiling (never stopped) that now waits: its wait is not the kernel's time.
                if child.held_since is not None and child.mark.waiting():
                    child.deadline += now - child.held_since
                child.held_since = None
                child.mark.release()  # before SIGCONT: a resumed child must find the hold gone
            child.stall.go(now)
            if child.paused_left is None:
                continue
            child.deadline = now + child.paused_left
            child.paused_left = None
            try:
                os.killpg(child.pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass

    def _on_gate(self, child: Child) -> None:
        """The child says it is ready to measure: it waits, without a deadline, for `go`."""
        try:
            data = child.gate.recv(64)  # type: ignore[union-attr]  # set for every child that has a gate
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close_gate(child)
            return
        if not child.ready and child.job_id in self.children:
            child.ready = True
            child.deadline = math.inf
            if child.paused_left is not None:
                child.paused_left = math.inf
            self._reply({"job_id": child.job_id, Reply.gate.value: Reply.ready})

    def _open_gate(self, child: Child | None) -> None:
        """The evaluator holds the GPU for this child: it gets a full time limit to measure."""
        if child is None or child.gate is None:
            return
        if child.paused_left is not None:  # it runs on, with a full limit, when resumed
            child.paused_left = child.timeout_s
        else:
            child.deadline = time.monotonic() + child.timeout_s
        try:
            child.gate.send(b"g")
        except OSError:
            pass
        self._close_gate(child)

    def _close_gate(self, child: Child) -> None:
        if child.gate is not None:
            self.sel.unregister(child.gate)
            child.gate.close()
            child.gate = None

    def _reap(self, child: Child) -> bool:
        if child.status is not None:
            return True
        try:
            pid, status = os.waitpid(child.pid, os.WNOHANG)
        except ChildProcessError:
            child.status = 0
            return True
        if pid == 0:
            return False
        child.status = status
        return True

    def _finish(self, child: Child) -> None:
        del self.children[child.job_id]
        self._close_gate(child)
        if child.mark is not None:
            child.mark.close()
            child.mark = None
        if child.pidfd is not None:
            self.sel.unregister(child.pidfd)
            os.close(child.pidfd)
        self._kill(child)  # whatever the candidate left running in its group goes too
        status = child.status or 0
        confined = False
        if child.setup_fd is not None:
            try:
                confined = os.read(child.setup_fd, 1) == b"s"
            except OSError:
                confined = False
            os.close(child.setup_fd)
        process_limit_hit = JobCgroups.process_limit_hit(child.cgroup)
        memory_limit_hit = JobCgroups.memory_limit_hit(child.cgroup)
        if child.cgroup:
            self.stale_cgroups.append(child.cgroup)
        if child.scratch is not None:
            shutil.rmtree(child.scratch, ignore_errors=True)
        self._reply({
            "job_id": child.job_id,
            Reply.finished.value: True,
            "confined": confined,
            "killed_for": child.killed_for or ("its time limit" if child.timed_out else None),
            "process_limit_hit": process_limit_hit,
            "memory_limit_hit": memory_limit_hit,
            "stalled": child.stalled,
            "device_pressure": child.pressure,
            "device_over": None if child.overdraw is None else {
                "used_bytes": child.overdraw.used_bytes, "share_bytes": child.overdraw.share_bytes,
                "free_bytes": child.overdraw.free_bytes},
            "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "timed_out": child.timed_out,
            "elapsed_s": time.monotonic() - child.started,
        })

    def _check_children(self) -> None:
        now = time.monotonic()
        for child in list(self.children.values()):
            if not child.timed_out and now > child.deadline:
                child.timed_out = True
                self._kill(child)
            elif not child.stalled and child.killed_for is None and child.stall.expired(now):
                child.stalled = True
                child.killed_for = child.stall.reason()[:600]
                self._kill(child)
            if self._reap(child):
                if child.status and self.watch is not None and not child.pressure:
                    self._watch_device()  # it failed: was the device short as it did?
                self._finish(child)
                self.next_sweep = 0.0  # its orphans, if any, are ours now
        if self.watch is not None and self.watch.due():
            self._watch_device()
        if now >= self.next_sweep:
            self._sweep_orphans()
            self._watch_file_table()
            self.stale_cgroups = [c for c in self.stale_cgroups if not self._removed(c)]
            self.next_sweep = now + SWEEP_EVERY_S

    def _watch_file_table(self) -> None:
        """Stop the job that holds the most open files once the machine's table is half full.
        Files mapped into memory stay open after their descriptors close, so no per-process
        limit caps what a job holds, and a full table fails every other job's next open."""
        used, most = file_table()
        if not most or used < most * FILE_TABLE_ALARM or not self.children:
            return
        held = {child: files_held(JobCgroups.processes(child.cgroup)) for child in self.children.values()
                if child.status is None and child.killed_for is None}
        if not held:
            return
        worst = max(held, key=held.__getitem__)
        if held[worst] >= most * FILE_TABLE_SHARE:
            worst.killed_for = (f"it held {held[worst]:,} open files, {100 * held[worst] / most:.0f}% of the "
                                "machine's file table, which every job shares")
            self._kill(worst)

    def _watch_device(self) -> None:
        """Once the device runs short, stop the jobs past their share (see `device_watch`) and
        mark every job alive then: a failure of theirs may be a neighbour's doing."""
        assert self.watch is not None
        live = {c.job_id: c for c in self.children.values() if c.killed_for is None}
        try:
            stop, short = self.watch.check({job_id: (JobCgroups.processes(c.cgroup) or [c.pid], c.device_share)
                                            for job_id, c in live.items()})
        except Exception:  # noqa: BLE001 - NVML failing mid-run ends the watch, not the warm parent
            self.watch = None
            return
        if short:
            for child in self.children.values():
                child.pressure = True
        for over in stop:
            child = live[over.job_id]
            child.overdraw = over
            child.killed_for = ("device memory: " + over.reason())[:600]
            self._kill(child)

    @staticmethod
    def _removed(cgroup: list[str]) -> bool:
        JobCgroups.remove(cgroup)
        return not any(os.path.exists(p) for p in cgroup)

    def _sweep_orphans(self) -> None:
        """Kill and reap every process that was left to us by a process that died: a candidate
        that detached something into its own session does not leave it running."""
        ours = {child.pid for child in self.children.values()}
        for pid in children_of(os.getpid()):
            if pid not in ours and pid not in self.orphans:
                for kill in (os.killpg, os.kill):  # its group too, if it made one
                    try:
                        kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                self.orphans.add(pid)
        for pid in list(self.orphans):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                self.orphans.discard(pid)

    def serve(self) -> None:
        while self.running:
            for key, _ in self.sel.select(timeout=0.05):
                if key.data is None:
                    self._read_ctrl()
                elif key.data[0] == "gate":
                    self._on_gate(key.data[1])
                # an exit event needs nothing here: the check below reaps it
            self._check_children()
            self._pause_when_due()
        for child in list(self.children.values()):
            self._kill(child)
            if child.scratch is not None:
                shutil.rmtree(child.scratch, ignore_errors=True)
        time.sleep(0.05)  # killed processes leave their cgroups
        for cgroup in self.stale_cgroups + [c.cgroup for c in self.children.values() if c.cgroup]:
            JobCgroups.remove(cgroup)
        self.limits.close()


def read_job(fd: int) -> dict:
    """The job a run request carries in its memfd (see `WorkerPool.submit`); closes `fd`."""
    from . import wire

    try:
        size = os.fstat(fd).st_size
        data = bytearray()
        while len(data) < size:
            piece = os.pread(fd, min(size - len(data), 1 << 26), len(data))
            if not piece:
                break
            data += piece
    finally:
        os.close(fd)
    head, blobs = wire.unpack(bytes(data[8:]))
    return {**head["job"], **{k: bytes(b) for k, b in zip(head.get("blob_keys") or [], blobs)}}


def main(run_job: RunJob, preload: Callable[[], None]) -> None:
    """Serve the control channel until told to stop; `preload` imports what every job needs, once."""
    die_with_parent()
    adopt_orphans()
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    os.dup2(2, 1)  # stray prints from imports must not reach anything that is read
    import torch  # noqa: F401 - the point of this process is to have these imported
    import torch._dynamo  # noqa: F401 - pulled in lazily by dispatch modes; costs seconds per child otherwise
    import torch.testing  # noqa: F401
    import torch.utils._python_dispatch  # noqa: F401
    import triton  # noqa: F401
    import triton.language  # noqa: F401
    import triton.runtime.interpreter  # noqa: F401
    try:
        import numpy  # noqa: F401
    except ImportError:
        pass

    import torch.utils.flop_counter  # noqa: F401

    preload()
    from . import wire

    level, detail = confine.probe()
    limits = JobCgroups(int(os.environ.get("ADAEXPLORE_MAX_PROCESSES", "256")))
    warm_parent = WarmParent(ctrl, level, limits, run_job)
    ctrl.sendall(wire.pack({Reply.ready.value: True, "pid": os.getpid(),
                            "sandbox": {"level": level, "detail": detail, "process_limit": limits.available,
                                        "memory_limit": limits.memory_available,
                                        "device_watch": warm_parent.watch is not None}}))
    warm_parent.serve()
    # Its children are reaped and its cgroups removed: nothing is left to close, and the interpreter's
    # teardown would only have Triton's native extension report its live objects as leaked on
    # stderr, which is the user's.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)

