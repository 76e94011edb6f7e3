"""The side-by-side benchmark against the field's harness, and the candidates it runs.

Runs in the pytest process on a CPU: the aggregation of benchmarks/vs_field.py on synthetic
results, its field-side driver against a stand-in harness, and a static look at every candidate
file in benchmarks/candidates (parsed, never executed).
"""

from __future__ import annotations

import ast
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from adaexplore.evaluator.lint import check_candidate

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import check_candidates  # noqa: E402
import vs_field  # noqa: E402

PROBLEMS = ROOT.parent / "shared" / "kernelbench" / "problems"
CANDIDATE_FILES = check_candidates.candidate_files()


def ours_row(key, status="correct", ms=1.0, ref_ms=2.0, copy_of=None, latency_s=1.0):
    task, variant = key.split("/")
    return {"key": key, "task": task, "variant": variant, "status": status, "ms": ms, "ref_ms": ref_ms,
            "copy_of": copy_of, "latency_s": latency_s}


# --- aggregation ------------------------------------------------------------------------------

def test_candidates_per_hour_is_count_over_wall_clock():
    assert vs_field.per_hour(30, 90.0) == pytest.approx(1200.0)
    assert vs_field.per_hour(0, 90.0) is None
    assert vs_field.per_hour(5, 0.0) is None


def test_percentiles_interpolate_between_ranks_and_ignore_missing_values():
    xs = [4.0, 1.0, 3.0, 2.0, None]
    assert vs_field.percentile(xs, 50) == pytest.approx(2.5)
    assert vs_field.percentile(xs, 100) == 4.0
    assert vs_field.percentile(xs, 0) == 1.0
    assert vs_field.percentile([], 95) is None


def test_agreement_counts_verdicts_and_compares_runtimes_of_candidates_correct_in_both():
    ours = [ours_row("t/a", ms=1.02), ours_row("t/b", status="wrong_output", ms=None),
            ours_row("t/c", ms=0.05), ours_row("t/d", ms=2.0), ours_row("t/e")]
    field = {"t/a": {"compiled": True, "correct": True, "runtime_ms": 1.0, "ref_runtime_ms": 2.0},
             "t/b": {"compiled": True, "correct": False, "runtime_ms": -1.0},
             "t/c": {"compiled": True, "correct": True, "runtime_ms": 0.04},
             "t/d": {"compiled": False, "correct": False}}
    got = vs_field.agreement(ours, field)
    assert (got["compared"], got["agree"]) == (4, 3)  # t/d: correct for us, not compiled for the field
    rows = {r["key"]: r for r in got["rows"]}
    assert rows["t/a"]["diff_pct"] == pytest.approx(2.0)
    assert rows["t/d"]["field"] == "not compiled" and rows["t/d"]["diff_pct"] is None
    assert rows["t/e"]["field"] == "not run"
    # Kernels under 0.1 ms are listed but not held to the bar (t/c differs by 25%).
    assert got["worst_key"] == "t/a" and got["worst_diff_pct"] == pytest.approx(2.0)
    assert (got["within_3pct"], got["timed_both"]) == (1, 1)


def test_a_harness_crash_counts_as_not_correct():
    assert vs_field.field_correct({"error": "Traceback ...", "rc": 1}) is False
    assert vs_field.field_correct(None) is None


def test_identical_copies_report_max_over_min_per_task():
    rows = [ours_row(f"t/v1#copy{k}", ms=ms, copy_of="v1") for k, ms in enumerate([1.0, 1.01, 1.02], 1)]
    rows += [ours_row("u/v1#copy1", ms=1.0, copy_of="v1"), ours_row("u/v1#copy2", ms=None, copy_of="v1")]
    rows += [ours_row("t/v2", ms=9.0)]
    spread = vs_field.copies_spread(rows)
    assert spread["t"]["max_over_min"] == pytest.approx(1.02)
    assert spread["u"]["max_over_min"] is None  # a copy without a runtime is not hidden
    assert set(spread) == {"t", "u"}


def test_summary_rates_the_serial_field_by_its_mean_cost_and_flags_a_subsample():
    ours = {"rows": [ours_row(f"t/v{i}", latency_s=i) for i in range(1, 5)]
            + [ours_row(f"t/v1#copy{k}", copy_of="v1") for k in range(1, 5)], "wall_s": 36.0}
    field = {"rows": {"t/v1": {"compiled": True, "correct": True, "runtime_ms": 1.0, "wall_s": 10.0},
                      "t/v2": {"compiled": True, "correct": True, "runtime_ms": 1.0, "wall_s": 14.0}},
             "parallel": 1, "wall_s": 24.0, "tol": 0.01}
    s = vs_field.summarize("search", ours, field, field_total=4)
    assert s["field"]["per_hour"] == pytest.approx(300.0)  # 3600 / 12 s
    assert s["field"]["subsampled"] is True
    assert s["ours"]["per_hour_all"] == pytest.approx(800.0)
    assert s["ours"]["per_hour_distinct"] == pytest.approx(400.0)
    assert s["ratio_distinct"] == pytest.approx(400.0 / 300.0)
    text = vs_field.render(s, "test device")
    assert "Ratio, ours / field: 1.3x" in text
    assert "ran 2 of 4 distinct candidates" in text
    assert "`cheat_detected` on these honest kernels: **0**" in text


def test_summary_lists_every_cheat_verdict_with_its_reason():
    ours = {"rows": [ours_row("t/v1", status="cheat_detected") | {"detail": "work escaped the timed region"}],
            "wall_s": 10.0}
    s = vs_field.summarize("first", ours, {"rows": {}, "skipped_reason": "test"}, field_total=1)
    assert s["ours"]["cheat_detected"] == [{"key": "t/v1", "reason": "work escaped the timed region"}]
    assert "work escaped the timed region" in vs_field.render(s, "x")


# --- shapes and the field side ---------------------------------------------------------------

def test_search_shape_has_six_tasks_of_five_variants_and_five_copies_each():
    subs = vs_field.submissions("search")
    tasks = {s["task"] for s in subs}
    assert len(tasks) >= 6
    for task in tasks:
        mine = [s for s in subs if s["task"] == task]
        assert len([s for s in mine if not s["copy_of"]]) >= 5
        assert len([s for s in mine if s["copy_of"]]) == vs_field.COPIES
        assert all(s["path"].exists() for s in mine if not s["copy_of"] and not s.get("retext_of"))


def test_first_contact_has_one_candidate_for_each_of_at_least_twelve_tasks():
    subs = vs_field.submissions("first")
    assert len(subs) >= 12 and len({s["task"] for s in subs}) == len(subs)
    assert all(s["path"].exists() for s in subs)


def test_copies_differ_from_their_kernel_only_by_a_comment():
    source = (vs_field.CANDIDATES / vs_field.SEARCH_TASKS[0] / f"{vs_field.COPIED_VARIANT}.py").read_text()
    copies = [vs_field.copy_source(source, k) for k in range(1, 6)]
    assert len(set(copies)) == 5
    assert all(ast.dump(ast.parse(c)) == ast.dump(ast.parse(source)) for c in copies)


@pytest.mark.parametrize("path", sorted(vs_field.CANDIDATES.glob("*/v*.py"))[:12], ids=lambda p: p.parent.name[:20] + "/" + p.stem)
def test_a_round_two_candidate_is_the_same_program_with_every_jitted_def_line_changed(path):
    source = path.read_text()
    again = vs_field.recompiled_source(source, "round 2")
    assert ast.dump(ast.parse(again)) == ast.dump(ast.parse(source))  # the same program
    jitted = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)
              and any("jit" in ast.unparse(d) for d in n.decorator_list)]
    lines = again.split("\n")
    assert jitted and all(lines[n.lineno - 1].endswith("# round 2") for n in jitted)  # what Triton keys its cache on
    assert again.count("# round 2") == len(jitted)


def test_tritons_cache_key_of_a_round_two_kernel_differs_so_it_compiles_again(tmp_path, monkeypatch):
    import importlib.util

    monkeypatch.setenv("TRITON_INTERPRET", "0")  # compiled kernels (JITFunction), not interpreted ones
    from triton.runtime.jit import JITFunction

    source = (vs_field.CANDIDATES / vs_field.SEARCH_TASKS[0] / f"{vs_field.COPIED_VARIANT}.py").read_text()
    keys = []
    for i, text in enumerate([source, vs_field.recompiled_source(source, "round 2")]):
        path = tmp_path / f"round{i}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(f"round{i}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        keys.append(sorted(v.cache_key for v in vars(module).values() if isinstance(v, JITFunction)))
    assert keys[0] and len(keys[0]) == len(keys[1]) and not set(keys[0]) & set(keys[1])


def test_the_steady_round_is_rated_against_the_same_field_rate():
    ours = {"rows": [ours_row("t/v1")], "wall_s": 100.0,
            "steady": {"rows": [ours_row("t/v1#r2"), ours_row("t/v2#r2", status="wrong_output")], "wall_s": 2.0}}
    field = {"rows": {"t/v1": {"compiled": True, "correct": True, "runtime_ms": 1.0, "wall_s": 10.0}},
             "parallel": 1, "wall_s": 10.0, "tol": 0.01}
    s = vs_field.summarize("search", ours, field, field_total=1)
    assert s["steady"]["per_hour"] == pytest.approx(3600.0) and s["steady"]["ratio"] == pytest.approx(10.0)
    assert s["steady"]["statuses"] == {"correct": 1, "wrong_output": 1}
    assert "Search round 2" in vs_field.render(s, "x") and "10.0x the field" in vs_field.render(s, "x")


def test_field_order_covers_every_task_before_a_second_variant_of_any():
    subs = vs_field.submissions("search")
    order = vs_field.field_order(subs)
    first_round = order[:len(vs_field.SEARCH_TASKS)]
    assert {s["task"] for s in first_round} == set(vs_field.SEARCH_TASKS)
    assert not any(s["copy_of"] for s in order)


def test_field_side_stops_starting_candidates_at_the_deadline(tmp_path):
    fake = tmp_path / "fake_harness.py"
    fake.write_text(textwrap.dedent('''
        import json, sys, time
        time.sleep(0.3)
        print("progress noise")
        print(json.dumps({"task": sys.argv[1], "candidate": sys.argv[2], "wall_s": 0.3, "compiled": True,
                          "correct": True, "runtime_ms": 1.5, "ref_runtime_ms": 3.0, "tol": sys.argv[4]}))
    '''))
    order = [{"key": f"t/v{i}", "task_path": tmp_path / "t.py", "path": tmp_path / f"v{i}.py"} for i in range(10)]
    args = SimpleNamespace(field_parallel=1, field_tol=0.01, field_timeout=30.0, field_repeats=1)
    out = vs_field.run_field(order, fake, tmp_path, args, deadline=time.monotonic() + 2.0)
    assert 1 <= len(out["rows"]) < 10
    row = out["rows"]["t/v0"]
    assert row["correct"] is True and row["runtime_ms"] == 1.5 and row["tol"] == "0.01"


def test_a_field_that_runs_each_candidate_three_times_is_compared_by_its_median(tmp_path):
    fake = tmp_path / "fake_harness.py"
    # Each run of a candidate is slower than the last: 1.0, 1.1, 1.2 ms (a counter file per candidate).
    fake.write_text(textwrap.dedent('''
        import json, pathlib, sys
        count = pathlib.Path(sys.argv[2] + ".count")
        n = int(count.read_text()) if count.exists() else 0
        count.write_text(str(n + 1))
        print(json.dumps({"wall_s": 0.1, "compiled": True, "correct": True, "runtime_ms": 1.0 + 0.1 * n,
                          "ref_runtime_ms": 2.0}))
    '''))
    order = [{"key": f"t/v{i}", "task_path": tmp_path / "t.py", "path": tmp_path / f"v{i}.py"} for i in range(2)]
    args = SimpleNamespace(field_parallel=1, field_tol=None, field_timeout=30.0, field_repeats=3)
    field = vs_field.run_field(order, fake, tmp_path, args, deadline=time.monotonic() + 60.0)
    assert [r["runtime_ms"] for r in field["runs"]["t/v0"]] == pytest.approx([1.0, 1.1, 1.2])
    ours = {"rows": [ours_row("t/v0", ms=1.12), ours_row("t/v1", ms=1.0)], "wall_s": 10.0, "startup_s": 1.0}
    s = vs_field.summarize("first", ours, field, field_total=2)
    a = s["agreement"]
    assert a["rows"][0]["field_ms"] == pytest.approx(1.1)  # the median, not the first run
    assert a["rows"][0]["diff_pct"] == pytest.approx(1.818, abs=1e-3)
    assert a["field_spread_max"] == pytest.approx(1.2)
    assert (s["field"]["ran"], s["field"]["runs"]) == (2, 6)
    assert "(6 runs)" in vs_field.render(s, "x") and "1.000, 1.100, 1.200" in vs_field.render(s, "x")


# --- the candidates, statically ---------------------------------------------------------------

def _init_arity(tree: ast.Module, cls: str) -> int:
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    init = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return len(init.args.args) - 1


def test_there_are_candidates_for_at_least_twelve_tasks():
    assert len({p.parent.name for p in CANDIDATE_FILES}) >= 12
    assert len(CANDIDATE_FILES) >= 30


@pytest.mark.parametrize("path", CANDIDATE_FILES, ids=[f"{p.parent.name}/{p.stem}" for p in CANDIDATE_FILES])
def test_candidate_defines_what_both_harnesses_load(path):
    source = path.read_text()
    tree = ast.parse(source)
    assert ast.get_docstring(tree), "every candidate says what it computes"
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assert "ModelNew" in classes  # KernelBench imports the file and takes ModelNew; so do we
    jitted = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)
              and any("jit" in ast.unparse(d) for d in n.decorator_list)}
    assert jitted, "at least one @triton.jit kernel"
    model_new = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    launched = {ast.unparse(n.func.value) for n in ast.walk(model_new)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)}
    assert launched & jitted, "ModelNew launches its kernels as kernel[grid](...)"
    imported = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    assert {"torch", "triton"} <= imported  # the file is imported on its own, with no harness names
    report = check_candidate(source)
    assert report.status is None and report.error is None, report


@pytest.mark.skipif(not PROBLEMS.is_dir(), reason="KernelBench problems not present next to the repository")
@pytest.mark.parametrize("path", CANDIDATE_FILES, ids=[f"{p.parent.name}/{p.stem}" for p in CANDIDATE_FILES])
def test_candidate_is_built_with_the_same_arguments_as_its_task(path):
    task = check_candidates.task_file(path, PROBLEMS)
    assert task.exists(), f"no KernelBench task {task.name}"
    assert _init_arity(ast.parse(path.read_text()), "ModelNew") == _init_arity(ast.parse(task.read_text()), "Model")


def test_the_cpu_check_shrinks_sizes_consistently():
    module = SimpleNamespace(batch_size=1024, in_features=8192, out_features=8192, bias_shape=(8192, 1, 1),
                             kernel_size=3, multiplier=2.0)
    changed = check_candidates.shrink(module)
    assert module.in_features == module.out_features == module.bias_shape[0] < 64
    assert module.kernel_size == 3 and module.multiplier == 2.0
    assert "kernel_size" not in changed

