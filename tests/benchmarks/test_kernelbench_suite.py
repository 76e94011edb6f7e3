"""The KernelBench suite runner's bookkeeping: which tasks each process takes when the suite is
split across GPUs, and one summary from the shards' rows. Nothing is evaluated here."""

import json
import subprocess
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from kernelbench_suite import level_paths  # noqa: E402


def problems(tmp_path, level: int, count: int):
    folder = tmp_path / f"level{level}"
    folder.mkdir(parents=True)
    for i in range(1, count + 1):
        (folder / f"{i}_Task{i}.py").write_text("")
    return tmp_path


def test_shards_split_each_level_into_disjoint_parts_that_cover_it_in_task_order(tmp_path):
    root = problems(tmp_path, 1, 11)
    parts = [level_paths(root, 1, [], shard=i, shards=2) for i in range(2)]
    assert [p.name for p in parts[0]][:3] == ["1_Task1.py", "3_Task3.py", "5_Task5.py"]
    names = [p.name for part in parts for p in part]
    assert sorted(names) == sorted(p.name for p in level_paths(root, 1, [])) and len(set(names)) == 11
    assert [p.name for p in level_paths(root, 1, ["1:2,7,10"], shard=1, shards=2)] == ["7_Task7.py"]


def test_the_report_of_a_split_run_counts_every_shards_rows(tmp_path):
    rows = [{"level": 1, "task": f"{i}_T.py", "registered": True, "verdict": "cheat_detected", "seconds": 10.0}
            for i in range(1, 4)]
    rows.append({"level": 2, "task": "9_T.py", "registered": False, "refused": "TaskError: outputs need 9 GB"})
    (tmp_path / "kb.0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    (tmp_path / "kb.1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[2:]))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kernelbench_suite.py"), "--problems", str(tmp_path),
                          "--jsonl", str(tmp_path / "kb.0.jsonl"), "--report", str(tmp_path / "kb.1.jsonl"),
                          "--markdown", str(tmp_path / "kb.md")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "| 1 | 3 | 3 | 0 | cheat_detected: 3 | 0 | 10.0 |" in out.stdout
    assert "| 2 | 1 | 0 | 1 |" in out.stdout and "`9_T.py`: TaskError: outputs need 9 GB" in out.stdout
    assert "| 1 | 3 | 3 | 0 | cheat_detected: 3 |" in (tmp_path / "kb.md").read_text()
