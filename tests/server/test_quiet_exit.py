"""Every command ends quietly: after a clean run its stderr holds only lines the project wrote.

Triton's native extension reports the objects of its own still alive when an interpreter tears
down ("nanobind: leaked ... instances"), which on a loaded machine happened at the end of
`adaexplore demo` and `adaexplore eval`. These tests make that condition certain instead of
waiting for the load to cause it: every Python process the command starts (the command itself,
the MCP server, the judge, the warm parent) gets a thread that holds a Triton object until the
end, as a busy thread does when the interpreter tears down around it.
"""

from __future__ import annotations

import re
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from server_support import EXAMPLES, VARIANTS, env

# Loaded by every Python process through PYTHONPATH: once Triton's extension is imported, a thread
# takes one of its objects and keeps it to the end.
HOLDER = '''
import sys
import threading
import time


def _hold():
    while "triton._C.libtriton" not in sys.modules:
        time.sleep(0.01)
    time.sleep(0.2)  # the import has finished
    held = sys.modules["triton._C.libtriton"].ir.context()
    while held is not None:
        time.sleep(1)


threading.Thread(target=_hold, daemon=True).start()
'''

# What the project writes on stderr: its log records (the server's format), its own messages.
OURS = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: "
                  r"|time: |adaexplore: |state kept in |note: |error: ")


def command(tmp_path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`adaexplore ARGS` in a process of its own, with a thread holding a Triton object in each of its processes."""
    holder = tmp_path / "holder"
    holder.mkdir(exist_ok=True)
    (holder / "sitecustomize.py").write_text(HOLDER)
    e = env()
    e["PYTHONPATH"] = ":".join(p for p in (str(holder), e.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "adaexplore.server.face.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=e, cwd=tmp_path)


def foreign_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip() and not OURS.match(line)]


def test_the_holder_does_make_a_process_that_imported_triton_report_leaks(tmp_path):
    command(tmp_path, "--help")  # writes the holder
    e = env()
    e["PYTHONPATH"] = str(tmp_path / "holder")
    out = subprocess.run([sys.executable, "-c", "import time, triton; time.sleep(1)"], capture_output=True,
                         text=True, timeout=120, env=e)
    assert "nanobind: leaked" in out.stderr


@pytest.mark.slow
def test_eval_ends_quietly_with_its_exit_code_and_its_whole_output(tmp_path):
    task = str(EXAMPLES / "tasks" / "softmax.py")
    good = command(tmp_path, "eval", task, str(next(VARIANTS.glob("04*.py"))))
    assert good.returncode == 0, good.stderr[-3000:]
    assert "status: correct" in good.stdout
    assert foreign_lines(good.stderr) == [], good.stderr[-3000:]
    bad = command(tmp_path, "eval", task, str(next(VARIANTS.glob("01*.py"))), "--json")
    assert bad.returncode == 1, bad.stderr[-3000:]
    assert bad.stdout.rstrip().endswith("}")  # the JSON document reached the reader whole
    assert foreign_lines(bad.stderr) == [], bad.stderr[-3000:]


@pytest.mark.slow
def test_the_demo_ends_quietly_and_its_server_closes_its_database_in_time(tmp_path):
    data = tmp_path / "data"
    out = command(tmp_path, "demo", "--data-dir", str(data))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "best candidates:" in out.stdout
    assert foreign_lines(out.stderr) == [], out.stderr[-3000:]
    # The client gives its server two seconds once it closes the connection, then kills it: the
    # server shut down in that time (its database closed, its write-ahead log folded in and removed).
    assert not Path(f"{next(data.glob('*.db'))}-wal").exists()


def test_a_refusal_keeps_its_exit_code_and_its_message(tmp_path):
    out = command(tmp_path, "serve", "--lease", "0")
    assert out.returncode == 1 and "--lease must be at least 1 second" in out.stderr
    assert command(tmp_path, "no-such-command").returncode == 2


def test_a_command_closes_its_database_before_it_exits(tmp_path):
    data = tmp_path / "data"
    out = command(tmp_path, "token", "issue", "alice", "--data-dir", str(data))
    assert out.returncode == 0, out.stderr
    db = next(data.glob("*.db"))
    # Closed, the last connection folded its write-ahead log into the file and removed it.
    assert not Path(f"{db}-wal").exists()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0


def test_a_judge_whose_evaluator_is_gone_before_it_is_ready_ends_without_a_traceback():
    # A server shut down while its judge was starting: the judge's first reply finds no one to read it.
    ours, theirs = socket.socketpair()
    ours.close()
    proc = subprocess.run([sys.executable, "-m", "adaexplore.evaluator.judge.process", str(theirs.fileno()), "cpu",
                           str(1 << 30)], pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)
    theirs.close()
    assert proc.returncode == 0 and proc.stderr.strip() == "", proc.stderr
