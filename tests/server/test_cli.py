"""The `adaexplore` command line."""

import json
import shutil

import pytest
from server_support import EXAMPLES, VARIANTS, cli


def test_token_issue_list_revoke(tmp_path):
    out = cli("token", "issue", "alice", "--scopes", "read,write", data_dir=tmp_path)
    assert out.returncode == 0 and out.stdout.strip().startswith("adx_") and "once" in out.stderr
    assert cli("token", "issue", "alice", data_dir=tmp_path).returncode == 2  # name taken
    assert cli("token", "issue", "x", "--scopes", "root", data_dir=tmp_path).returncode == 2
    listed = cli("token", "list", data_dir=tmp_path).stdout
    assert "alice\tread,write\tactive" in listed and out.stdout.strip() not in listed
    assert cli("token", "revoke", "alice", data_dir=tmp_path).returncode == 0
    assert "revoked" in cli("token", "list", data_dir=tmp_path).stdout
    assert cli("token", "revoke", "alice", data_dir=tmp_path).returncode == 1


@pytest.mark.slow
def test_eval_exit_codes_and_json(tmp_path):
    task = str(EXAMPLES / "tasks" / "softmax.py")
    bad = cli("eval", task, str(next(VARIANTS.glob("01*.py"))), "--json")
    assert bad.returncode == 1, bad.stderr
    assert json.loads(bad.stdout)["status"] == "compile_error"
    good = cli("eval", task, str(next(VARIANTS.glob("04*.py"))))
    assert good.returncode == 0, good.stdout + good.stderr
    assert "status: correct" in good.stdout
    assert "time:" in good.stderr and "reference" in good.stderr and "candidate check" in good.stderr
    assert json.loads(bad.stdout) and "time:" in bad.stderr  # the JSON on stdout stays a document
    assert cli("eval", task, str(tmp_path / "missing.py")).returncode == 2


def test_eval_answers_what_the_static_checks_decide_without_running_the_reference():
    task = str(EXAMPLES / "tasks" / "softmax.py")
    plain = cli("eval", task, str(EXAMPLES.parent / "tests" / "exploits" / "e01_no_kernel.py"))
    assert plain.returncode == 1 and "status: no_triton_kernel" in plain.stdout
    assert "device: none (the static checks decided)" in plain.stdout
    assert "reference" not in plain.stderr and "time: " in plain.stderr  # no reference ran, no worker started


@pytest.mark.slow
def test_tasks_import_folder(tmp_path):
    folder = tmp_path / "level1"
    folder.mkdir()
    shutil.copy(EXAMPLES / "tasks" / "softmax.py", folder / "1_softmax.py")
    (folder / "2_not_a_task.py").write_text("x = 1\n")
    out = cli("tasks", "import", str(folder), data_dir=tmp_path / "data")
    assert "1_softmax\tadded" in out.stdout and "2_not_a_task.py\tskipped" in out.stdout
    again = cli("tasks", "import", str(folder), data_dir=tmp_path / "data")
    assert "1_softmax\texists" in again.stdout


def test_memory_commands(tmp_path):
    exported = tmp_path / "mem.json"
    assert cli("memory", "list", data_dir=tmp_path).returncode == 0
    assert cli("memory", "export", "--out", str(exported), data_dir=tmp_path).returncode == 0
    assert cli("memory", "import", str(exported), data_dir=tmp_path / "other").returncode == 0
    assert cli("memory", "retire", "r-nope", data_dir=tmp_path).returncode == 1


@pytest.mark.slow
def test_demo_drives_a_search_over_stdio():
    out = cli("demo", timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "connected over stdio" in out.stdout and "best candidates:" in out.stdout
    assert "recorded rule" in out.stdout and "correct" in out.stdout
    assert "ERROR" not in out.stderr, out.stderr[-2000:]  # a clean shutdown is silent


def test_a_remote_server_is_refused_where_the_sandbox_is_weaker_unless_accepted(tmp_path, monkeypatch, capsys):
    from adaexplore.evaluator.sandbox import confine
    from adaexplore.server.face import cli as cli_module

    monkeypatch.setattr(confine, "probe", lambda: (confine.LEVEL_WEAK, "namespaces cannot be created here"))
    code = cli_module.main(["serve", "--http", "--host", "0.0.0.0", "--allow-remote", "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "weaker sandbox" in err and "--accept-weak-sandbox" in err
