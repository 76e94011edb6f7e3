"""One caller's candidate against the server, the host and the other callers of a shared server.

A team server runs many callers' jobs beside each other. Each test below is an attack one of
them tried: every one must leave no trace outside its sandbox, steal nothing into its own
feedback, and leave the evaluator serving the others. The candidates are built as in
test_sandbox_hostile: the example softmax kernel, attacking first in each forward.
"""

from __future__ import annotations

import ctypes
import os
import socket
import stat
import sys
import threading
import time
import uuid

import pytest
from conftest import example_task
from test_sandbox_hostile import hostile, run

from adaexplore.evaluator.evaluator import Evaluator
from adaexplore.evaluator.results import Status
from adaexplore.evaluator.sandbox import confine

CANARY = f"canary-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """An evaluator started as a server would be, with a secret in its environment."""
    data = tmp_path_factory.mktemp("team-server")
    os.environ["ADAEXPLORE_TEST_API_KEY"] = CANARY
    try:
        ev = Evaluator(work_dir=data / "work", hidden_paths=[data], max_parallel=3,
                       memory_limit_bytes=6 << 30)
        if ev.sandbox_level() != confine.LEVEL_FULL:
            ev.close()
            pytest.skip("this machine cannot make namespaces: the sandbox runs at its weaker level")
    finally:
        del os.environ["ADAEXPLORE_TEST_API_KEY"]
    yield ev
    ev.close()


def concurrently(ev: Evaluator, first: str, second: str, head_start_s: float = 1.5):
    """Evaluate two candidates side by side, the second once the first is under way."""
    results = {}
    task = example_task("softmax", timeout_s=90)

    def evaluate(name, source):
        results[name] = ev.evaluate(task, source)

    victim = threading.Thread(target=evaluate, args=("first", first))
    victim.start()
    time.sleep(head_start_s)
    evaluate("second", second)
    victim.join(120)
    return results["first"], results["second"]


def slow_once(seconds: float) -> str:
    """Attack text that sleeps in the first forward only."""
    return ("import time, builtins\nif not getattr(builtins, 'slept', False):\n"
            f"    builtins.slept = True\n    time.sleep({seconds})")


def test_the_servers_environment_never_reaches_a_candidate(server):
    result = run(server, '''
import os
seen = open("/proc/self/environ", "rb").read().decode(errors="replace") + repr(dict(os.environ))
for pid in ("1", "2"):
    try:
        seen += open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
    except OSError:
        pass
raise Leak("ENV:" + seen)
''')
    text = result.model_dump_json()
    assert "ENV:" in text, "the attack did not run"
    assert CANARY not in text and "ADAEXPLORE_TEST_API_KEY" not in text


def occurrences_in_memory(pid: int, needle: bytes) -> int:
    """How often `needle` is in the readable memory of process `pid` (read from outside, as root)."""
    found = 0
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if "r" not in fields[1] or hi - lo > (1 << 30):
                continue
            try:
                mem.seek(lo)
                found += mem.read(hi - lo).count(needle)
            except (OSError, ValueError, OverflowError):
                continue
    return found


def test_another_callers_source_is_not_in_the_memory_a_job_inherits(server):
    """Every job is a fork of the warm parent: whatever its memory holds, every job holds."""
    secret = "-".join(["VICTIM", "SOURCE", uuid.uuid4().hex])
    earlier = run(server, f"x = {secret!r}")  # an earlier caller's job
    assert earlier.status is Status.correct, earlier.feedback()
    assert occurrences_in_memory(server.pool.warm_parent_pid(), secret.encode()) == 0
    scan = '''
import re
found = []
needle = "-".join(["VICTIM", "SOURCE", ""]).encode()
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
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
        for m in re.finditer(re.escape(needle) + rb"[0-9a-f]{32}", chunk):
            found.append(m.group().decode())
raise Leak("SCANNED:" + ",".join(sorted(set(found))))
'''
    first, second = concurrently(server, hostile(f"x = {secret!r}\n" + slow_once(4)), hostile(scan))
    assert first.status is Status.correct, first.feedback()
    text = second.model_dump_json()
    assert "SCANNED:" in text, "the scan did not run"
    assert secret not in text, "a job found another caller's source in its memory"


def test_a_job_cannot_read_a_concurrent_jobs_output(server):
    # Made at run time, so no file holds the marker but the victim's output.
    secret = "-".join(["VICTIM", "OUTPUT", uuid.uuid4().hex])
    talker = f"print({secret[::-1]!r}[::-1], flush=True)\n" + slow_once(5)
    search = '''
import os
hits, looked, own = [], 0, os.getcwd()  # its own folder holds its own source, which names the marker
for top in ("/", "/tmp"):
    for root, dirs, files in os.walk(top):
        if root.startswith(("/proc", "/sys", "/dev", "/usr", own)):
            dirs[:] = []
            continue
        for name in files:
            path = os.path.join(root, name)
            try:
                if os.path.getsize(path) < (1 << 20):
                    looked += 1
                    if "-".join(["VICTIM", "OUTPUT", ""]).encode() in open(path, "rb").read():
                        hits.append(path)
            except OSError:
                pass
raise Leak(f"LOOKED:{looked} HITS:{hits}")
'''
    first, second = concurrently(server, hostile(talker), hostile(search))
    assert first.status is Status.correct, first.feedback()
    text = second.model_dump_json()
    assert "LOOKED:" in text, "the search did not run"
    assert "HITS:[]" in text, text


def test_a_root_only_host_file_stays_closed_even_where_the_view_shows_it(server):
    secret = f"ROOT-ONLY-{uuid.uuid4().hex}"
    inside = os.path.join(os.path.realpath(sys.prefix), f".adaexplore-test-{uuid.uuid4().hex}")  # shown
    outside = f"/var/cache/adaexplore-test-{uuid.uuid4().hex}"  # not shown at all
    made = []
    for path in (inside, outside):
        try:
            with open(path, "w") as fh:
                fh.write(secret)
            os.chmod(path, 0o600)
            made.append(path)
        except OSError:
            continue
    if not made:
        pytest.skip("cannot place a root-only file here")
    try:
        result = run(server, f'''
seen = []
for path in {made!r}:
    try:
        seen.append(open(path).read())
    except OSError as exc:
        seen.append(type(exc).__name__)
raise Leak("READ:" + repr(seen))
''')
    finally:
        for path in made:
            os.remove(path)
    text = result.model_dump_json()
    assert "READ:" in text and secret not in text, text


def test_a_host_socket_cannot_be_reached_outside_the_view_or_inside_it(server, tmp_path):
    # Outside the view, open to anyone; inside it (the Python installation), root's, as a
    # service's socket usually is: the view stops the first, the job's identity the second.
    paths = {f"/var/lib/adaexplore-test-{uuid.uuid4().hex[:8]}.sock": 0o777,
             os.path.join(os.path.realpath(sys.prefix), f".adaexplore-test-{uuid.uuid4().hex[:8]}.sock"): 0o755}
    listeners, accepted = [], []
    for path, mode in paths.items():
        try:
            sock = socket.socket(socket.AF_UNIX)
            sock.bind(path)
        except OSError:
            continue
        os.chmod(path, mode)
        sock.listen(4)
        sock.settimeout(0.2)
        listeners.append((path, sock))
    if not listeners:
        pytest.skip("cannot place a host socket here")
    stop = threading.Event()

    def accept(sock):
        while not stop.is_set():
            try:
                accepted.append(sock.accept())
            except (socket.timeout, OSError):
                continue

    threads = [threading.Thread(target=accept, args=(s,), daemon=True) for _, s in listeners]
    for t in threads:
        t.start()
    try:
        result = run(server, f'''
import socket
for path in {[p for p, _ in listeners]!r}:
    try:
        socket.socket(socket.AF_UNIX).connect(path)
        raise Leak("CONNECTED:" + path)
    except OSError:
        pass
''')
    finally:
        stop.set()
        for t in threads:
            t.join(2)
        for path, sock in listeners:
            sock.close()
            os.remove(path)
    assert not accepted and "CONNECTED:" not in result.model_dump_json(), result.feedback()
    assert result.status is Status.correct, result.feedback()


def test_the_jobs_output_descriptor_is_no_host_file_to_grow_or_make_setuid(server):
    before = {p: os.stat(p) for p in _files_under(server.work_dir)}
    result = run(server, '''
import os, stat
kinds = []
for fd in (1, 2):
    kinds.append(stat.S_IFMT(os.fstat(fd).st_mode))
    for act in (lambda: os.ftruncate(fd, 256 << 20), lambda: os.fchmod(fd, 0o6777)):
        try:
            act()
        except OSError:
            pass
raise Leak(f"KINDS:{kinds}")
''')
    text = result.model_dump_json()
    assert f"KINDS:[{stat.S_IFIFO}, {stat.S_IFIFO}]" in text, text  # pipes, read by the evaluator
    for path in _files_under(server.work_dir):
        st = os.stat(path)
        assert st.st_size < (64 << 20), f"{path} grew to {st.st_size}"
        assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID), f"{path} became setuid"
        assert path in before or not st.st_mode & 0o002


def _files_under(top) -> list[str]:
    out = []
    for root, _, files in os.walk(top):
        out += [os.path.join(root, f) for f in files]
    return out


def test_memfds_beyond_the_jobs_memory_limit_end_the_job_as_out_of_memory(server):
    if not _memory_cgroup_here():
        pytest.skip("no memory cgroup on this machine")
    result = run(server, '''
import os
block, fds = b"x" * (64 << 20), []
for _ in range(16):  # 16 memfds of 512 MiB each (one file may not exceed 1 GiB): beyond the 6 GiB a job gets
    fds.append(os.memfd_create("hog"))
    for _ in range(8):
        os.write(fds[-1], block)
raise Leak("HELD 8 GiB")
''')
    assert "HELD 8 GiB" not in result.model_dump_json()
    assert result.status is Status.oom, result.feedback()
    assert "host memory" in result.feedback()
    assert run(server, "pass").status is Status.correct


def _memory_cgroup_here() -> bool:
    """Whether this machine offers the memory controller (cgroup v1 or v2) to a root process."""
    v1 = "/sys/fs/cgroup/memory/cgroup.procs"
    try:
        v2 = "memory" in open("/sys/fs/cgroup/cgroup.controllers").read().split()
    except OSError:
        v2 = False
    return os.getuid() == 0 and (os.path.exists(v1) or v2)


def _inotify_instances_left() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        return False
    os.close(fd)
    return True


def test_a_job_exhausting_per_user_kernel_quotas_takes_none_of_the_hosts(server):
    held_s = 4
    attack = f'''
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
held = []
while len(held) < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    held.append(fd)
time.sleep({held_s})
for fd in held:
    os.close(fd)
'''
    failures, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            if not _inotify_instances_left():
                failures.append(time.monotonic())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = run(server, attack)
    finally:
        stop.set()
        watcher.join(2)
    assert result.status is Status.correct, result.feedback()
    assert not failures, f"a process of the host could not make an inotify instance {len(failures)} times"


def test_feedback_names_no_host_folder_of_the_server_or_another_job(server):
    result = run(server, '''
import os, torch
print("printed from", os.path.dirname(torch.__file__), flush=True)
raise Leak("I am in " + os.getcwd() + " and " + os.path.abspath(__file__) + " beside " + torch.__file__)
''')
    text = result.model_dump_json()
    assert "I am in" in text, text
    for folder in (str(server.work_dir), os.getcwd(), os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)):
        assert folder not in text, f"{folder} in {text}"
