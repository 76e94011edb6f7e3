"""Hostile candidates against the sandbox: each attack fails to have its effect, gets a definite
status, and the evaluator keeps serving other jobs.

Every candidate below is the example softmax kernel that first attempts its attack (swallowing
the error a sandbox raises), then computes honestly: an attack that is stopped leaves a correct
kernel, and an attack that works leaves a trace this test finds: a row in the database, a file,
a connection, a dead process, or what it stole raised into its own feedback.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from conftest import EXAMPLES, example_task

from adaexplore.evaluator.evaluator import Evaluator
from adaexplore.evaluator.results import Status

SOFTMAX = (EXAMPLES / "kernels" / "softmax.py").read_text()
ATTACK = '''

class Leak(Exception):
    """What an attack that worked shows in its feedback."""


def attack():
    try:
{attack}
    except Leak:
        raise
    except BaseException as exc:  # a sandbox says no; the kernel goes on honestly
        return exc
'''


def hostile(attack: str) -> str:
    """The example softmax kernel, attacking first in every forward."""
    body = "\n".join("        " + line for line in attack.strip("\n").splitlines())
    forward = "        x = x.contiguous()\n"
    assert forward in SOFTMAX
    return SOFTMAX.replace(forward, "        attack()\n" + forward, 1) + ATTACK.replace("{attack}", body)


def run(ev: Evaluator, attack: str, timeout_s: float = 60):
    return ev.evaluate(example_task("softmax", timeout_s=timeout_s), hostile(attack))


def tokens(server_data_dir) -> list[tuple]:
    db = sqlite3.connect(server_data_dir / "adaexplore.db")
    try:
        return db.execute("select * from tokens").fetchall()
    finally:
        db.close()


def test_a_candidate_cannot_write_the_database_or_mint_a_token(sandboxed, server_data_dir):
    result = run(sandboxed, f'''
import sqlite3
db = sqlite3.connect({str(server_data_dir / "adaexplore.db")!r})
db.execute("insert into tokens values ('mallory', 'minted', 'admin')")
db.commit()
''')
    assert result.status is Status.correct, result.feedback()
    assert [row[0] for row in tokens(server_data_dir)] == ["alice"]


def test_a_candidate_cannot_read_the_token_table_into_its_feedback(sandboxed, server_data_dir):
    result = run(sandboxed, f'''
import sqlite3
rows = sqlite3.connect({str(server_data_dir / "adaexplore.db")!r}).execute("select * from tokens").fetchall()
raise Leak("stolen: " + repr(rows))
''')
    assert "secret-hash-of-alice" not in result.model_dump_json()
    assert result.status is Status.correct


def test_a_candidate_cannot_write_home_the_data_directory_or_the_source_tree(sandboxed, server_data_dir):
    home = os.path.expanduser("~")
    targets = [os.path.join(home, "pwned-by-candidate"), str(server_data_dir / "pwned"),
               str(server_data_dir / "work" / "pwned"), os.path.join(os.path.dirname(__file__), "pwned")]
    result = run(sandboxed, f'''
for path in {targets!r}:
    try:
        open(path, "w").write("x")
    except OSError:
        pass
''')
    assert result.status is Status.correct, result.feedback()
    assert not [t for t in targets if os.path.exists(t)]


def test_a_candidate_reads_no_secret_file(sandboxed, tmp_path):
    if not os.path.exists("/etc/shadow"):
        pytest.skip("no /etc/shadow on this machine")
    result = run(sandboxed, '''
text = open("/etc/shadow").read()
if text:
    raise Leak("SHADOW:" + text[:200])
''')
    assert "SHADOW:" not in result.model_dump_json()
    assert result.status is Status.correct


def test_a_candidate_cannot_open_a_socket_to_the_host(sandboxed):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted = []

    def accept():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not accepted:
            try:
                accepted.append(listener.accept())
            except (socket.timeout, OSError):
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    result = run(sandboxed, f'''
import socket
socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"hello")
''')
    accepted.append(None)
    thread.join(5)
    listener.close()
    assert result.status is Status.correct, result.feedback()
    assert accepted == [None]


def test_a_candidate_cannot_kill_the_server_the_warm_parent_or_anything_else(sandboxed):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    parent = sandboxed.pool.warm_parent_pid()
    try:
        result = run(sandboxed, f'''
import os, signal
for pid in ({os.getpid()}, {parent}, {bystander.pid}):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
os.kill(-1, signal.SIGKILL)  # every process this one may signal
''')
        assert bystander.poll() is None
        assert sandboxed.pool.warm_parent_pid() == parent
        assert result.status in (Status.correct, Status.runtime_error), result.feedback()
        follow_up = run(sandboxed, "pass")
        assert follow_up.status is Status.correct, follow_up.feedback()
    finally:
        bystander.kill()
        bystander.wait()


def test_a_candidate_cannot_kill_another_job_in_flight(sandboxed):
    killer = '''
import os, signal
for entry in os.listdir("/proc"):
    if entry.isdigit() and int(entry) != os.getpid():
        try:
            os.kill(int(entry), signal.SIGKILL)
        except OSError:
            pass
'''
    honest = example_task("softmax", timeout_s=60)
    results = {}

    def evaluate(name, source):
        results[name] = sandboxed.evaluate(honest, source)

    # The victim is slow the first time only (on a GPU its forward also runs 110 timed times).
    slow_once = "import time, builtins\nif not getattr(builtins, 'slept', False):\n    builtins.slept = True\n" \
                "    time.sleep(3)"
    victims = [threading.Thread(target=evaluate, args=("victim", hostile(slow_once)))]
    victims[0].start()
    time.sleep(1.0)
    evaluate("killer", hostile(killer))
    victims[0].join(120)
    assert results["victim"].status is Status.correct, results["victim"].feedback()
    assert results["killer"].status is Status.correct


def test_filling_the_disk_stops_at_the_private_tmp(sandboxed, tmp_path):
    before = os.statvfs("/").f_bavail * os.statvfs("/").f_frsize
    result = run(sandboxed, '''
import os
block = b"x" * (1 << 20)
try:
    with open("fill", "wb") as fh:
        while True:
            fh.write(block)
finally:  # the limit held; make room to compile the kernel
    os.remove("fill")
''')
    after = os.statvfs("/").f_bavail * os.statvfs("/").f_frsize
    assert result.status is Status.correct, result.feedback()  # the write failed; the kernel went on
    assert before - after < (512 << 20), f"the disk lost {(before - after) >> 20} MiB"


def test_a_fork_bomb_is_capped_and_the_evaluator_keeps_serving(sandboxed):
    if not sandboxed.pool.sandbox.get("process_limit"):
        pytest.skip("no pids cgroup on this machine")
    result = run(sandboxed, '''
import os, time
children = 0
for _ in range(400):
    if os.fork() == 0:
        time.sleep(30)
        os._exit(0)
    children += 1
raise Leak(f"started {children} processes")
''')
    assert result.status in (Status.correct, Status.runtime_error), result.feedback()
    assert "started 400 processes" not in result.model_dump_json()
    assert run(sandboxed, "pass").status is Status.correct


def test_a_faked_infrastructure_error_is_the_candidates_own(sandboxed):
    result = run(sandboxed, '''
import gc
from adaexplore.evaluator.worker.harness import Reporter
reporter = next(o for o in gc.get_objects() if isinstance(o, Reporter))
reporter.send({"kind": "infra", "message": "Triton cache race during compile: FileNotFoundError"})
import os
os._exit(0)
''')
    assert result.status is not Status.infra_error
    assert result.status in (Status.runtime_error, Status.cheat_detected), result.feedback()


def test_a_candidate_sees_only_its_own_process_and_no_network(sandboxed):
    result = run(sandboxed, '''
import os, socket
pids = [p for p in os.listdir("/proc") if p.isdigit()]
names = socket.if_nameindex()
up = open("/sys/class/net/lo/operstate").read().strip() if os.path.exists("/sys/class/net/lo/operstate") else "?"
raise Leak(f"VIEW pids={len(pids)} pid={os.getpid()} home={os.listdir(os.path.expanduser('~'))}")
''')
    text = result.model_dump_json()
    assert "VIEW pids=2 pid=2" in text, text


def test_a_candidate_cannot_change_the_hosts_device_files(sandboxed):
    before = os.stat("/dev/null").st_mode
    result = run(sandboxed, '''
import os
os.chmod("/dev/null", 0)
open("/dev/null", "w").write("still a sink")
''')
    assert os.stat("/dev/null").st_mode == before
    assert result.status in (Status.correct, Status.runtime_error), result.feedback()


def test_an_uncaught_permission_error_is_the_candidates_runtime_error_with_its_line(sandboxed):
    source = hostile("pass").replace("        attack()\n", "        attack()\n        open('/etc/passwd', 'w')\n")
    result = sandboxed.evaluate(example_task("softmax", timeout_s=60), source)
    assert result.status is Status.runtime_error, result.feedback()
    assert "Read-only file system" in result.error.message or "PermissionError" in result.feedback()
    assert result.error.line is not None


def test_a_candidate_cannot_change_kernel_settings_or_crash_the_machine(sandboxed):
    before = open("/proc/sys/kernel/core_pattern").read()
    result = run(sandboxed, '''
for path, text in (("/proc/sys/kernel/core_pattern", "|/tmp/job/evil"), ("/proc/sysrq-trigger", "h")):
    try:
        open(path, "w").write(text)
    except OSError:
        pass
''')
    assert open("/proc/sys/kernel/core_pattern").read() == before
    assert result.status is Status.correct, result.feedback()


def test_where_namespaces_cannot_be_made_kernels_still_run_at_the_weaker_level(tmp_path):
    """The weaker level (no namespaces: capabilities, seccomp and limits only) is a working
    evaluator, not a broken one; only the walls differ."""
    from adaexplore.evaluator.sandbox import confine

    ev = Evaluator(work_dir=tmp_path)
    make_job = ev.runner.job

    def weak_job(*args, **kwargs):
        job = make_job(*args, **kwargs)
        return dataclasses.replace(job, sandbox=dataclasses.replace(job.sandbox, level=confine.LEVEL_WEAK))

    ev.runner.job = weak_job
    try:
        result = run(ev, "pass")
        assert result.status is Status.correct, result.feedback()
    finally:
        ev.close()
