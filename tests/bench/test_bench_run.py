"""`adaexplore bench` end to end on the CPU: a scripted OpenAI-compatible endpoint on loopback answers with
fixture kernels (one fails to compile, one is wrong, one is correct), a real server evaluates them."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from adaexplore.server.bench.replay import ReplayEndpoint

ROOT = Path(__file__).resolve().parents[2]
REPLAY = Path(__file__).resolve().parent / "replay"
EXAMPLES = ROOT / "examples" / "tasks"
KEY = "bench-test-key"
pytestmark = pytest.mark.slow


def command(run_dir: Path, ep: ReplayEndpoint, *extra: str) -> list[str]:
    return [sys.executable, "-m", "adaexplore.server.face.cli", "bench", "--problems", str(EXAMPLES), "--level", "2",
            "--run-dir", str(run_dir), "--base-url", ep.base_url, "--model", "replay", "--api-key", KEY,
            "--no-progress", *extra]


def run(run_dir: Path, ep: ReplayEndpoint, *extra: str, timeout: float = 240) -> subprocess.CompletedProcess:
    out = subprocess.run(command(run_dir, ep, *extra), capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@pytest.fixture
def endpoint():
    with ReplayEndpoint(REPLAY, api_key=KEY) as ep:
        yield ep


def test_the_three_methods_run_at_the_same_budget_and_report_with_plots(tmp_path, endpoint):
    run_dir = tmp_path / "run"
    run(run_dir, endpoint, "--tasks", "7", "--steps", "3", "--method", "all", "--parallel")
    steps = {v: lines(run_dir / v / "steps.jsonl") for v in ("tree", "chain", "sample")}
    assert {v: sorted(s["step"] for s in got) for v, got in steps.items()} == {v: [1, 2, 3] for v in steps}
    # Nine answers cycle through the three fixture kernels, whichever variant asked first.
    statuses = sorted(s["status"] for got in steps.values() for s in got)
    assert statuses == ["compile_error"] * 3 + ["correct"] * 3 + ["wrong_output"] * 3

    def root(variant):
        return lines(run_dir / variant / "tasks.jsonl")[0]["root_node_id"]

    # sample: every step a large step from the root.
    assert all(s["action"] == "large" and s["parent_id"] == root("sample") for s in steps["sample"])
    # chain: a large step from the root first, then always the best correct node so far, else the last node.
    chain = sorted(steps["chain"], key=lambda s: s["step"])
    assert chain[0]["action"] == "large" and chain[0]["parent_id"] == root("chain")
    for before, now in zip(chain, chain[1:]):
        best = next((s["node_id"] for s in chain[: now["step"] - 1] if s["status"] == "correct"), None)
        assert now["action"] == "small" and now["parent_id"] == (best or before["node_id"])
    # tree: the search assigned the steps; the root always gets a large step.
    tree = sorted(steps["tree"], key=lambda s: s["step"])
    assert tree[0]["action"] == "large" and tree[0]["parent_id"] == root("tree")
    assert {s["action"] for s in tree} <= {"large", "small"}
    # With the memory on, every compile error was turned into a rule request.
    assert endpoint.rule_requests == 3

    # The same run folder gains the variant without memory (two agents sharing the tree); it asks for no rule.
    run(run_dir, endpoint, "--tasks", "7", "--steps", "3", "--method", "tree", "--no-memory", "--agents", "2")
    assert endpoint.rule_requests == 3
    nomem = lines(run_dir / "tree-nomem" / "steps.jsonl")
    assert sorted(s["step"] for s in nomem) == [1, 2, 3] and {s["agent"] for s in nomem} == {0, 1}

    report = orjson.loads((run_dir / "report.json").read_bytes())
    assert list(report["variants"]) == ["tree", "tree-nomem", "chain", "sample"]
    for v in report["variants"].values():
        assert v["summary"]["eager"]["accuracy"] == 1.0 and v["per_task"][0]["correct"]
    # `adaexplore report` writes the same report and plots again from the logs.
    for p in [run_dir / "report.md", *(run_dir / "plots").glob("*.png")]:
        p.unlink()
    out = subprocess.run([sys.executable, "-m", "adaexplore.server.face.cli", "report", str(run_dir)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    md = (run_dir / "report.md").read_text()
    assert "| tree-nomem | 1 | 3 | 100% |" in md and "| softmax | chain | yes |" in md
    pngs = {p.name: p.read_bytes() for p in (run_dir / "plots").glob("*.png")}
    assert set(pngs) == {"best_speedup.png", "final_speedups.png", "verdicts.png"}
    assert all(data.startswith(b"\x89PNG") and len(data) > 2000 for data in pngs.values())


def test_a_run_killed_mid_way_or_stopped_by_its_budget_resumes_where_its_task_stands(tmp_path, endpoint):
    run_dir = tmp_path / "run"
    args = command(run_dir, endpoint, "--tasks", "3", "--steps", "4", "--method", "chain")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    log = run_dir / "chain" / "steps.jsonl"
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if log.exists() and log.read_bytes().count(b"\n") >= 1:
                break
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the bench and the server it started
        proc.wait()
    first = lines(log)
    assert 1 <= len(first) < 3, "the run went too far before it was killed"
    task_id = lines(run_dir / "chain" / "tasks.jsonl")[0]["task_id"]

    # A token budget stops the next run cleanly after one step.
    out = run(run_dir, endpoint, "--tasks", "3", "--steps", "4", "--method", "chain", "--max-tokens", "1")
    assert "token budget of 1 is used up" in out.stderr and "again to resume" in out.stderr
    assert len(lines(log)) == len(first) + 1
    run(run_dir, endpoint, "--tasks", "3", "--steps", "4", "--method", "chain")
    after = lines(log)
    assert sorted(s["step"] for s in after) == [1, 2, 3, 4]
    assert after[: len(first)] == first  # the steps before the kill were kept, not redone
    assert {t["task_id"] for t in lines(run_dir / "chain" / "tasks.jsonl")} == {task_id}  # the same tree
    assert all(s["node_id"].startswith(task_id.split("-")[0]) for s in after if s["node_id"])


def test_the_adapt_stage_builds_the_memory_that_the_search_then_reads(tmp_path, endpoint):
    run_dir = tmp_path / "run"
    run(run_dir, endpoint, "--tasks", "3", "--steps", "1", "--method", "sample", "--adapt-rounds", "1",
        "--adapt-tasks", "1")
    adapted = lines(run_dir / "sample" / "adapt.jsonl")
    assert [(a["task"], a["status"]) for a in adapted] == [("adapt-r1-1", "compile_error")]
    assert endpoint.rule_requests == 1
    # The rule the failure taught is in the search's prompt (from get_skill_memory), marked unconfirmed.
    search_prompt = next(t for t in endpoint.seen if t.startswith("Task name: fused_add_mul"))
    assert "tl.constexpr parameter" in search_prompt.split("## Skill memory")[1]
    assert "## Adapt stage" in (run_dir / "report.md").read_text()

