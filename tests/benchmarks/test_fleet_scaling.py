"""The fleet benchmark's level-2 workload: which candidates it runs, and that it steps aside
with a reason when the problems or the candidates are not there."""

import subprocess
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import fleet_scaling  # noqa: E402


def write(path, text="x = 1\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_each_candidate_is_paired_with_the_level2_problem_its_folder_names(tmp_path):
    problems, cands = tmp_path / "level2", tmp_path / "candidates"
    write(problems / "12_Gemm_Multiply_LeakyReLU.py")
    write(problems / "40_Matmul_Scaling_ResidualAdd.py")
    write(cands / "12_Gemm_Multiply_LeakyReLU" / "b_tiled.py")
    write(cands / "12_Gemm_Multiply_LeakyReLU" / "a_fused.py")
    write(cands / "99_Not_A_Problem" / "a.py")
    found, reason = fleet_scaling.kb_pairs(problems, cands)
    assert reason is None
    assert [(stem, c.name) for stem, _, c in found] == [("12_Gemm_Multiply_LeakyReLU", "a_fused.py"),
                                                        ("12_Gemm_Multiply_LeakyReLU", "b_tiled.py")]
    assert all(p == problems / "12_Gemm_Multiply_LeakyReLU.py" for _, p, _ in found)


def test_missing_problems_or_candidates_are_named_as_the_reason_to_skip(tmp_path):
    (tmp_path / "level2").mkdir()
    assert fleet_scaling.kb_pairs(tmp_path / "nowhere", tmp_path)[1].startswith("no KernelBench level-2 problems")
    assert "no level-2 candidates" in fleet_scaling.kb_pairs(tmp_path / "level2", tmp_path / "nowhere")[1]
    assert "names a task" in fleet_scaling.kb_pairs(tmp_path / "level2", tmp_path)[1]


def test_the_benchmark_skips_the_level2_workload_cleanly_when_its_folders_are_absent(tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fleet_scaling.py"), "--kb-level2",
                          str(tmp_path / "level2"), "--kb-candidates", str(tmp_path / "candidates")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "skipped" in run.stdout and str(tmp_path / "level2") in run.stdout
