"""A second hostile tenant of a shared team server: attacks the hostile, tenant and red-team suites
do not try. Each test is one attack, built as there (the example softmax kernel that attacks first,
then computes honestly, unless the attack is the kernel itself), and asserts the attack had no
effect visible outside its sandbox and that the evaluator keeps serving.

Attacks that must run once guard themselves with a flag on `builtins` (the attack text runs in
every forward).
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid

from conftest import EXAMPLES, example_task
from test_sandbox_hostile import hostile, run
from test_sandbox_redteam import concurrently, honest, honest_and_serving

from adaexplore.evaluator.results import Status

SOFTMAX = (EXAMPLES / "kernels" / "softmax.py").read_text()
SECRET = "secret-hash-of-alice"
ONCE = "import builtins\nif getattr(builtins, 'rt2_done', False):\n    return None\nbuiltins.rt2_done = True\n"


def said(result) -> str:
    """What a job raised or printed, on one line (for the evidence a run prints)."""
    text = (result.error.message if result.error else "") + " | " + (result.stdout_tail or "")[-300:]
    return text.replace("\n", " ")[-700:]


def host_processes_named(name: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as fh:
                    if fh.read().strip() == name:
                        found.append(pid)
            except OSError:
                pass
    return found


# --------------------------------------------------------------------------------------------
# 1. Mount tables, command lines, maps and descriptor links name host folders even where the
#    view hides them: a job that reads them learns where the server keeps its data.
# --------------------------------------------------------------------------------------------

def test_mount_tables_maps_and_links_name_no_host_folder_of_the_server(sandboxed, server_data_dir):
    needles = sorted({str(server_data_dir), os.path.realpath(server_data_dir), str(server_data_dir.parent)})
    result = run(sandboxed, ONCE + f'''
import glob, os
needles = {needles!r}
hits = []
def look(where, text):
    for line in text.replace("\\0", " ").splitlines():
        for n in needles + ["pytest-of"]:
            at = line.find(n)
            if at >= 0:  # hex, so that no scrubbing of the feedback hides what was seen
                hits.append(where + ": " + line[max(0, at - 40):at + len(n) + 40].encode().hex())
                break
for path in ("/proc/self/mountinfo", "/proc/1/mountinfo", "/proc/self/mounts", "/proc/self/mountstats",
             "/proc/self/cmdline", "/proc/1/cmdline", "/proc/self/maps", "/proc/1/maps", "/proc/self/environ",
             "/proc/self/cgroup", "/proc/1/cgroup"):
    try:
        look(path, open(path, errors="replace").read())
    except OSError:
        pass
for link in glob.glob("/proc/*/fd/*") + glob.glob("/proc/*/cwd") + glob.glob("/proc/*/exe") + glob.glob("/proc/*/root") \\
        + glob.glob("/proc/*/map_files/*"):
    try:
        look(link, os.readlink(link))
    except OSError:
        pass
for path in glob.glob("/sys/block/*/loop/backing_file"):
    try:
        look(path, open(path).read())
    except OSError:
        pass
raise Leak("MOUNTHITS:" + repr(sorted(set(hits))) + ":END")
''')
    text = result.model_dump_json()
    assert "MOUNTHITS:" in text, result.feedback()
    assert "MOUNTHITS:[]:END" in text, f"the job learned where the server's data lives: {result.feedback()}"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 2. /proc/<pid>/root, /proc/<pid>/cwd and directory descriptors of the visible processes: a
#    magic link to a root or folder outside the view reaches the host's files by name.
# --------------------------------------------------------------------------------------------

def test_proc_root_cwd_and_directory_descriptors_reach_no_host_file(sandboxed, server_data_dir):
    db = str(server_data_dir / "adaexplore.db")
    result = run(sandboxed, ONCE + f'''
import os, stat
db, data = {db!r}, {str(server_data_dir)!r}
seen, stolen = [], []
bases = ["/proc/1/root", "/proc/2/root", "/proc/self/root", "/proc/1/cwd", "/proc/self/cwd", "/proc/thread-self/root"]
for pid in ("1", "self"):
    try:
        for fd in os.listdir(f"/proc/{{pid}}/fd"):
            bases.append(f"/proc/{{pid}}/fd/{{fd}}")
    except OSError:
        pass
def grab(path):
    try:
        with open(path, "rb") as fh:
            blob = fh.read(1 << 20)
        if "-".join(["secret", "hash", "of", "alice"]).encode() in blob:
            stolen.append(path)
    except OSError:
        pass
for base in bases:
    try:
        st = os.stat(base)
    except OSError:
        continue
    if not stat.S_ISDIR(st.st_mode):
        continue
    seen.append(base)
    grab(base + db)
    for up in range(0, 10):
        grab(base + "/.." * up + db)
        grab(base + "/.." * up + "/adaexplore.db")
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
        for up in range(0, 10):
            grab(f"/proc/self/fd/{{fd}}" + "/.." * up + db)
        os.close(fd)
    except OSError:
        pass
raise Leak(f"DIRS:{{seen}} STOLEN:{{stolen}}:END")
''')
    text = result.model_dump_json()
    print("EVIDENCE proc-root:", said(result))
    assert "DIRS:" in text, result.feedback()
    assert SECRET not in text and "STOLEN:[]:END" in text, result.feedback()
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 3. pidfd_getfd: the namespace's init holds descriptors of its own (to the warm parent, its
#    pipes); a pidfd for pid 1 would copy them into the job without ptrace.
# --------------------------------------------------------------------------------------------

def test_pidfd_getfd_copies_no_descriptor_out_of_the_namespace_init(sandboxed):
    result = run(sandboxed, ONCE + '''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
stolen, errors = [], set()
for pid in (1, os.getppid()):
    pidfd = libc.syscall(434, pid, 0)  # pidfd_open
    if pidfd < 0:
        errors.add(f"open{pid}:{ctypes.get_errno()}")
        continue
    for target in range(0, 256):
        fd = libc.syscall(438, pidfd, target, 0)  # pidfd_getfd
        if fd >= 0:
            try:
                stolen.append(f"{pid}/{target}->" + os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                stolen.append(f"{pid}/{target}")
        else:
            errors.add(f"get:{ctypes.get_errno()}")
raise Leak(f"STOLE:{stolen}:END ERR:{sorted(errors)}")
''')
    text = result.model_dump_json()
    print("EVIDENCE pidfd:", said(result))
    assert "STOLE:" in text, result.feedback()
    assert "STOLE:[]:END" in text, f"descriptors copied out of pid 1: {result.feedback()}"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 4. Symlinks, FIFOs and hardlinks planted everywhere the job may write, named as the server's
#    files might be, and its own files swapped for links to the server's database: a root server
#    that later opens, copies, chmods or reads the job's folders would follow them.
# --------------------------------------------------------------------------------------------

def test_links_and_fifos_planted_in_the_jobs_folders_are_not_followed(sandboxed, server_data_dir, tmp_path):
    import sys

    victim = tmp_path / "victim.txt"
    victim.write_text("host file, root only")
    os.chmod(victim, 0o600)
    db = server_data_dir / "adaexplore.db"
    watched = [victim, db, server_data_dir, os.path.realpath(sys.executable)]
    before = {str(p): (os.stat(p).st_mode, os.stat(p).st_uid, os.stat(p).st_gid, os.stat(p).st_size) for p in watched}
    db_bytes = db.read_bytes()
    targets = [str(db), str(server_data_dir), str(victim), "/etc/shadow", "/root", str(server_data_dir / "work")]
    plant = f'''
import os, sys
targets = {targets!r}
names = ["result.json", "results", "stdout", "stderr", "out", "output", "log", "cache", "kernel.py", "candidate.py",
         "source.py", "task.py", "adaexplore.db", "triton", ".triton", "baselines", "ring", "done", "status"]
tops = {{os.getcwd(), "/tmp", os.environ.get("HOME", "/"), os.environ.get("TRITON_CACHE_DIR", "/tmp/.triton")}}
dirs = set()
for top in sorted(tops):
    if top in ("/", "") or not top.startswith("/"):
        continue
    try:
        os.makedirs(top, exist_ok=True)
    except OSError:
        pass
    for root, ds, fs in os.walk(top):
        if os.access(root, os.W_OK):
            dirs.add(root)
        if root.count("/") > 6 or len(dirs) > 200:
            ds[:] = []
planted = 0
for d in sorted(dirs):
    for i, target in enumerate(targets):
        for name in [f"rt2-link-{{i}}", names[i % len(names)], names[(i + 7) % len(names)]]:
            try:
                os.symlink(target, os.path.join(d, name))
                planted += 1
            except OSError:
                pass
    for name in names:
        try:
            os.mkfifo(os.path.join(d, name + ".fifo"), 0o666)
            os.mkfifo(os.path.join(d, name), 0o666)
        except OSError:
            pass
    try:
        os.link(os.path.realpath(sys.executable), os.path.join(d, "rt2-hardlink"))
    except OSError:
        pass
    for name in os.listdir(d):  # the job's own files: swapped for links to the database
        path = os.path.join(d, name)
        if os.path.isfile(path) and not os.path.islink(path) and not name.startswith("rt2"):
            try:
                os.rename(path, path + ".rt2orig")
                os.symlink(targets[0], path)
            except OSError:
                pass
    try:
        os.chmod(d, 0o777)
    except OSError:
        pass
print(f"PLANTED {{planted}} links in {{sorted(dirs)}}", flush=True)
'''
    t0 = time.monotonic()
    result = run(sandboxed, ONCE + plant, timeout_s=60)
    elapsed = time.monotonic() - t0
    print("EVIDENCE links:", result.status.value, round(elapsed, 1), said(result))
    assert result.status is not Status.infra_error, result.feedback()
    assert elapsed < 90, f"the server waited {elapsed:.0f} s on the job's folders"
    after = {str(p): (os.stat(p).st_mode, os.stat(p).st_uid, os.stat(p).st_gid, os.stat(p).st_size) for p in watched}
    assert after == before, f"a host file changed: {before} -> {after}"
    assert victim.read_text() == "host file, root only" and db.read_bytes() == db_bytes
    assert SECRET not in result.model_dump_json()
    copies = []
    for root, _dirs, files in os.walk(sandboxed.work_dir):
        for name in files:
            path = os.path.join(root, name)
            try:
                if not os.path.islink(path) and os.path.getsize(path) < (16 << 20) and \
                        SECRET.encode() in open(path, "rb").read():
                    copies.append(path)
            except OSError:
                pass
    assert not copies, f"the server copied the database to where jobs write: {copies}"
    t0 = time.monotonic()
    honest_and_serving(sandboxed)
    assert time.monotonic() - t0 < 60


# --------------------------------------------------------------------------------------------
# 5. Abstract Unix sockets live in the network namespace, not the file system: the view hides
#    no abstract name. One reached from a job would be a channel to the host or to another job.
# --------------------------------------------------------------------------------------------

def test_abstract_unix_sockets_reach_neither_the_host_nor_another_job(sandboxed):
    host_name = f"\0adaexplore-rt2-host-{uuid.uuid4().hex}"
    job_name = f"\0adaexplore-rt2-job-{uuid.uuid4().hex}"
    host = socket.socket(socket.AF_UNIX)
    host.bind(host_name)
    host.listen(8)
    host.settimeout(0.2)
    accepted, stop = [], threading.Event()

    def accept():
        while not stop.is_set():
            try:
                accepted.append(host.accept())
            except (socket.timeout, OSError):
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    listener = ONCE + f'''
import os, socket, time
s = socket.socket(socket.AF_UNIX)
s.bind({job_name!r})
s.listen(8)
s.settimeout(0.2)
got = 0
end = time.monotonic() + 7
while time.monotonic() < end:
    try:
        c, _ = s.accept()
        got += 1
    except OSError:
        pass
names = [l.split()[-1] for l in open("/proc/net/unix").read().splitlines()[1:] if l.split()[-1].startswith("@")]
raise Leak(f"ACCEPTED:{{got}} ABSTRACT:{{names}}")
'''
    dialer = ONCE + f'''
import socket, time
connected = []
end = time.monotonic() + 3
while time.monotonic() < end and not connected:
    for name in ({host_name!r}, {job_name!r}):
        try:
            socket.socket(socket.AF_UNIX).connect(name)
            connected.append(name[1:])
        except OSError:
            pass
    time.sleep(0.1)
raise Leak(f"CONNECTED:{{connected}}:END")
'''
    try:
        results = concurrently(sandboxed, hostile(listener), hostile(dialer), head_start_s=2.0)
    finally:
        stop.set()
        thread.join(2)
        host.close()
    first, second = results["first"].model_dump_json(), results["second"].model_dump_json()
    print("EVIDENCE abstract:", said(results["first"]), "|", said(results["second"]))
    assert "ACCEPTED:" in first and "CONNECTED:" in second, (first, second)
    assert not accepted, "a job connected to an abstract socket of the host"
    assert "CONNECTED:[]:END" in second, f"a job reached an abstract socket: {second}"
    assert "ACCEPTED:0 " in first, f"a job accepted another job's connection: {first}"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 6. Jamming the pipes the trusted side writes to the job (slot credits and the like): each
#    read end reopened for writing, shrunk to one page and filled, then the job stalls. A
#    trusted writer that blocks on it waits on this job while the others wait on it.
# --------------------------------------------------------------------------------------------

JAM = '''
import builtins, fcntl, os, time
calls = getattr(builtins, "rt2_calls", 0) + 1
builtins.rt2_calls = calls
if calls == 1:
    jammed, keep = [], []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
            flags = int(open(f"/proc/self/fdinfo/{fd}").read().split("flags:")[1].split()[0], 8)
        except (OSError, IndexError, ValueError):
            continue
        if not link.startswith("pipe:") or flags & 3 != os.O_RDONLY:
            continue
        try:  # on its own read end: the pipe is shared with the trusted writer
            shrunk = fcntl.fcntl(fd, 1031, 4096)  # F_SETPIPE_SZ: one page
        except OSError as exc:
            shrunk = f"E{exc.errno}"
        try:
            w = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            jammed.append(f"{fd}:{link}:shrunk={shrunk}:reopen=E{exc.errno}")
            continue
        try:
            fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ: one page
        except OSError:
            pass
        n = 0
        try:
            while n < (1 << 20):
                n += os.write(w, b"\\xff" * 512)
        except OSError:
            pass
        keep.append(w)
        jammed.append(f"{fd}:{link}:{n}")
    builtins.rt2_keep = keep
    print("JAMMED", jammed, flush=True)
elif calls <= 4:
    time.sleep(7)
'''


def test_jamming_the_pipes_the_server_writes_to_stalls_no_other_job(sandboxed):
    t0 = time.monotonic()
    honest_and_serving(sandboxed)
    alone = time.monotonic() - t0
    results = concurrently(sandboxed, hostile(JAM), honest(), head_start_s=3.0,
                           first_timeout_s=60, second_timeout_s=60)
    victim = results["second"]
    print("EVIDENCE jam:", round(alone, 1), round(results["second_s"], 1), results["first"].status.value,
          (results["first"].stdout_tail or "")[-300:])
    assert victim.status is Status.correct, victim.feedback()
    limit = max(15.0, 4 * alone)
    assert results["second_s"] < limit, (
        f"an honest job that takes {alone:.1f} s alone took {results['second_s']:.1f} s beside a job "
        f"that jammed its pipes: {results['first'].stdout_tail}")
    assert results["first"].status is not Status.infra_error, results["first"].feedback()
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 7. SIGSTOP: the job stops its init, a child and itself, holding its slot, its ring and its
#    memory. It must be timed out as its own doing, and hold up no one else.
# --------------------------------------------------------------------------------------------

def test_a_job_that_stops_itself_is_its_own_timeout_and_holds_up_no_one(sandboxed):
    name = f"rt2s{uuid.uuid4().hex[:10]}"
    stopper = ONCE + f'''
import ctypes, os, signal
ctypes.CDLL(None).prctl(15, b"{name}", 0, 0, 0)
for sig in (signal.SIGSTOP, signal.SIGTSTP):
    try:
        os.kill(1, sig)
    except OSError:
        pass
if os.fork() == 0:
    os.setsid()
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
os.kill(0, signal.SIGSTOP)
os.kill(os.getpid(), signal.SIGSTOP)
'''
    results = concurrently(sandboxed, hostile(stopper), honest(), head_start_s=2.0,
                           first_timeout_s=10, second_timeout_s=60)
    assert results["second"].status is Status.correct, results["second"].feedback()
    attacker = results["first"]
    print("EVIDENCE stop:", attacker.status.value, round(results["first_s"], 1), said(attacker))
    assert attacker.status is not Status.infra_error, attacker.feedback()
    assert attacker.status in (Status.timeout, Status.runtime_error), attacker.feedback()
    assert results["first_s"] < 45, f"a stopped job held its verdict {results['first_s']:.0f} s"
    time.sleep(2)
    assert not host_processes_named(name), "a stopped process outlived its job"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 8. Writable knobs: every file under /sys and /proc (but the processes' own folders) that the
#    job may open for writing. None should be: /sys is documented as read-only.
# --------------------------------------------------------------------------------------------

def test_no_sys_or_proc_knob_is_writable_from_a_job(sandboxed):
    result = run(sandboxed, ONCE + '''
import os, stat, time
uid, gid = os.getuid(), os.getgid()
writable, looked = [], 0
end = time.monotonic() + 25
for top in ("/sys", "/proc"):
    for root, dirs, files in os.walk(top):
        if time.monotonic() > end:
            break
        if top == "/proc" and root == "/proc":
            dirs[:] = [d for d in dirs if not d.isdigit() and d not in ("self", "thread-self")]
        for name in files + dirs:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            looked += 1
            m = st.st_mode
            if not (m & 0o002 or (st.st_uid == uid and m & 0o200) or (st.st_gid == gid and m & 0o020)):
                continue
            if stat.S_ISDIR(st.st_mode):
                if os.access(path, os.W_OK):
                    writable.append(path + "/")
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if path.startswith("/proc/pressure/"):  # PSI triggers: world-writable by design
                continue
            try:
                if path.startswith("/proc/sys/"):  # sysctls check at write: write the value back
                    with open(path) as fh:
                        value = fh.read()
                    with open(path, "w") as fh:
                        fh.write(value)
                else:
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                writable.append(path)
            except OSError:
                pass
raise Leak(f"LOOKED:{looked} WRITABLE:{writable[:40]}:END")
''', timeout_s=90)
    text = result.model_dump_json()
    print("EVIDENCE knobs:", said(result))
    assert "LOOKED:" in text, result.feedback()
    assert "WRITABLE:[]:END" in text, f"knobs a job can write: {result.feedback()}"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 9. A hostile *task* module: registered by one caller, its module-level code writes a host file
#    and reads the server's database. It may run only in the sandbox (never in the server that
#    checks, hashes and validates it), and what it reads there must not come back in a verdict.
# --------------------------------------------------------------------------------------------

def test_a_hostile_task_module_runs_nowhere_but_the_sandbox(sandboxed, server_data_dir, tmp_path):
    from adaexplore.evaluator.results import EvalProtocol
    from adaexplore.evaluator.task import Task, TaskError, check_task_source

    canaries = [tmp_path / "written-by-a-task", server_data_dir / "written-by-a-task"]
    db = str(server_data_dir / "adaexplore.db")
    source = f'''
import os
import torch
import torch.nn as nn

for _path in {[str(c) for c in canaries]!r}:
    try:
        with open(_path, "w") as _fh:
            _fh.write("a task module ran here")
    except OSError:
        pass
try:
    _stolen = open({db!r}, "rb").read()
except OSError:
    _stolen = b""


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if "-".join(["secret", "hash", "of", "alice"]).encode() in _stolen:
            raise RuntimeError("STOLEN:" + _stolen.decode("latin-1"))
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
'''
    try:
        check_task_source(source)
    except TaskError:
        pass
    task = Task(name=f"rt2_task_{uuid.uuid4().hex[:8]}", source=source, protocol=EvalProtocol(timeout_s=60))
    assert not [c for c in canaries if c.exists()], "checking or hashing the task ran its code in the server"
    validation = sandboxed.validate_task(task)
    result = sandboxed.evaluate(task, SOFTMAX + f"\n# {uuid.uuid4().hex}\n")
    print("EVIDENCE task:", validation.ok, result.status.value)
    assert not [c for c in canaries if c.exists()], "the task's code wrote a host file"
    assert SECRET not in validation.model_dump_json() and SECRET not in result.model_dump_json()
    assert validation.ok, validation.model_dump_json()
    assert result.status is Status.correct, result.feedback()
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 10. Forging the "Triton does the work" rule: a no-op Triton kernel is launched, and the
#     reference's own PyTorch op runs in another thread, where an op recorder scoped to the
#     calling thread does not look. The README: if every op of the reference still runs in
#     PyTorch the verdict is cheat_detected. Both are caught by the forward run once more with
#     every Triton launch dropped: its output is still right.
# --------------------------------------------------------------------------------------------

NOOP_KERNEL = '''
import threading

import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def noop_kernel(p, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p + offs, tl.load(p + offs))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scratch = torch.zeros(16, device=x.device)
        noop_kernel[(1,)](scratch, BLOCK=16)
        return WORK
'''


def test_the_references_op_run_in_another_thread_is_still_cheat_detected(sandboxed):
    task = example_task("softmax", timeout_s=60)
    plain = sandboxed.evaluate(task, NOOP_KERNEL.replace("WORK", "torch.softmax(x, dim=-1)"))
    assert plain.status is Status.cheat_detected, plain.feedback()  # the rule, where it looks
    threaded = NOOP_KERNEL.replace("        return WORK", '''        box = []
        worker = threading.Thread(target=lambda: box.append(torch.softmax(x, dim=-1)))
        worker.start()
        worker.join()
        return box[0]''')
    result = sandboxed.evaluate(task, threaded)
    assert result.status is Status.cheat_detected, (
        "torch.softmax did all the work (in a second thread) beside a no-op Triton kernel, and the "
        f"verdict was {result.status.value}")


def test_numpy_doing_all_the_work_beside_a_noop_triton_kernel_is_not_correct(sandboxed):
    work = ("torch.from_numpy((lambda a: np.exp(a - a.max(-1, keepdims=True)) / "
            "np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True))(x.detach().cpu().numpy())).to(x.device)")
    result = sandboxed.evaluate(example_task("softmax", timeout_s=60), NOOP_KERNEL.replace("WORK", work))
    assert result.status is Status.cheat_detected, (
        f"numpy did all the work beside a no-op Triton kernel, and the verdict was {result.status.value}")
    assert "Triton launch skipped" in (result.cheat_reason or ""), result.cheat_reason


# --------------------------------------------------------------------------------------------
# 11. Verdict reuse: the same source evaluated first under a lenient protocol (loose tolerance,
#     a long time limit) or another task of the same name, then under the strict one. A verdict
#     kept by source alone would be one caller's leniency handed to another.
# --------------------------------------------------------------------------------------------

def test_a_verdict_is_never_reused_across_protocols_or_tasks_of_the_same_name(sandboxed):
    from adaexplore.evaluator.results import TOLERANCE_PROFILES, EvalProtocol
    from adaexplore.evaluator.task import Task

    tag = uuid.uuid4().hex
    off = SOFTMAX.replace("        return out\n", "        return out + 0.05\n") + f"\n# {tag}\n"
    lenient = example_task("softmax", timeout_s=60, tolerance=TOLERANCE_PROFILES["loose"])
    first = sandboxed.evaluate(lenient, off)
    strict = sandboxed.evaluate(example_task("softmax", timeout_s=60), off)
    print("EVIDENCE reuse loose/default:", first.status.value, strict.status.value)
    if first.status is Status.correct:
        assert strict.status is Status.wrong_output, f"loose verdict reused: {strict.status.value}"
    else:
        assert strict.status is Status.wrong_output, strict.feedback()

    slow = hostile(f"import time\ntime.sleep(1.5)\n# {tag}")
    patient = sandboxed.evaluate(example_task("softmax", timeout_s=60), slow)
    assert patient.status is Status.correct, patient.feedback()
    hurried = sandboxed.evaluate(example_task("softmax", timeout_s=2), slow)
    assert hurried.status is Status.timeout, f"a 60 s verdict reused under a 2 s limit: {hurried.status.value}"

    base = example_task("softmax", timeout_s=60)
    doubled = Task(name=base.name, source=base.source.replace("return torch.softmax(x, dim=-1)",
                                                             "return torch.softmax(x, dim=-1) * 2"),
                   protocol=EvalProtocol(timeout_s=60))
    assert doubled.source != base.source
    honest_source = SOFTMAX + f"\n# honest {tag}\n"
    assert sandboxed.evaluate(base, honest_source).status is Status.correct
    other = sandboxed.evaluate(doubled, honest_source)
    assert other.status is Status.wrong_output, f"a verdict on another task of the same name: {other.status.value}"


# --------------------------------------------------------------------------------------------
# 12. Half-closed channels: the job closes every descriptor it was given (its result pipe,
#     stdout, stderr, its ring), so the server reads end-of-file while the job and a detached
#     child of it live on, named so the host can look for them.
# --------------------------------------------------------------------------------------------

def test_a_job_that_closes_its_channels_and_lingers_leaves_nothing_running(sandboxed):
    name = f"rt2c{uuid.uuid4().hex[:10]}"
    attack = ONCE + f'''
import ctypes, os, time
libc = ctypes.CDLL(None)
libc.prctl(15, b"{name}", 0, 0, 0)
for fd in range(0, 4096):
    try:
        os.close(fd)
    except OSError:
        pass
if os.fork() == 0:
    os.setsid()
    libc.prctl(15, b"{name}", 0, 0, 0)
    time.sleep(120)
    os._exit(0)
time.sleep(120)
'''
    t0 = time.monotonic()
    result = run(sandboxed, attack, timeout_s=15)
    elapsed = time.monotonic() - t0
    print("EVIDENCE closed:", result.status.value, round(elapsed, 1), said(result))
    assert result.status is not Status.infra_error, result.feedback()
    assert result.status is not Status.correct, result.feedback()
    assert elapsed < 60, f"the verdict took {elapsed:.0f} s"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and host_processes_named(name):
        time.sleep(0.2)
    assert not host_processes_named(name), "a process of the job outlived its verdict"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 13. Outputs the trusted side may not expect: dtypes the comparison may have no kernel for,
#     sparse, quantized and meta tensors, thirty dimensions, and a stride-0 view that declares a
#     terabyte while holding a row. Each is the candidate's own failure: never the server's
#     (infra_error), never the judge's death, never the server's memory.
# --------------------------------------------------------------------------------------------

EXOTIC_OUTPUTS = {
    "uint64": "out.to(torch.uint64)",
    "complex": "out.to(torch.complex64)",
    "float8": "out.to(torch.float8_e5m2)",
    "sparse": "out.to_sparse()",
    "quantized": "torch.quantize_per_tensor(out, 0.001, 0, torch.quint8)",
    "meta": "torch.empty_like(out, device='meta')",
    "thirty_dims": "out.reshape([1] * 30 + [64, 256])",
    "terabyte_view": "out.reshape(-1).as_strided((1 << 38,), (0,))",
    "stride0_rows": "out[:1].expand(64, 256)",
}


def test_exotic_outputs_are_the_candidates_own_failure(sandboxed):
    from test_sandbox_redteam import _PeakRss

    judge = sandboxed.judge.pid()
    got = {}
    with _PeakRss() as rss:
        for name, expr in EXOTIC_OUTPUTS.items():
            source = SOFTMAX.replace("        return out\n", f"        return {expr}\n") + f"\n# {uuid.uuid4().hex}\n"
            t0 = time.monotonic()
            got[name] = (sandboxed.evaluate(example_task("softmax", timeout_s=30), source), time.monotonic() - t0)
    summary = {n: (r.status.value, round(s, 1)) for n, (r, s) in got.items()}
    print("EVIDENCE exotic:", summary, (rss.peak - rss.base) >> 20, "MiB")
    blamed = {n: r.feedback()[-300:] for n, (r, _) in got.items() if r.status is Status.infra_error}
    assert not blamed, f"the server took the blame: {blamed}"
    assert sandboxed.judge.pid() == judge, f"the judge died: {summary}"
    assert all(got[n][0].status is not Status.correct for n in ("meta", "terabyte_view", "stride0_rows")), summary
    assert rss.peak - rss.base < (512 << 20), f"the server grew by {(rss.peak - rss.base) >> 20} MiB"
    assert all(s < 60 for _, s in got.values()), summary
    honest_and_serving(sandboxed)
