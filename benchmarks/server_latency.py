"""Latency of expand_node and best_candidates on a 10,000-node tree, through the in-memory MCP client.

    python benchmarks/server_latency.py [--nodes 10000] [--calls 200]

The tree is written straight into the store (no evaluation); the evaluator is never started.
Target: p99 < 20 ms for both tools (MCP client round trip included).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

from adaexplore.server.core.config import ServerConfig
from adaexplore.server.core.tree_store import TreeStore, root_id
from adaexplore.server.face.app import build_server

STATUSES = ["correct"] * 4 + ["wrong_output", "compile_error", "runtime_error", "nan_output"]


class NoEvaluator:
    device = "cpu"

    def validate_task(self, task):  # pragma: no cover - never called here
        raise RuntimeError("not used")

    def evaluate(self, task, source, protocol=None):  # pragma: no cover
        raise RuntimeError("not used")

    def close(self):
        pass


def build_tree(db: Path, n: int, seed: int = 0) -> str:
    store = TreeStore(db)
    tid = "bench000000000000"
    store.insert_task(task_id=tid, name="bench", source="class Model: pass\ndef get_inputs(): pass\n"
                      "def get_init_inputs(): pass\n", source_hash="h", validation={}, flags=[],
                      params={"step_budget": None}, protocol={}, created_by="bench", root_status="reference",
                      root_speedup=None, root_reward=None, root_result=None)
    rng = random.Random(seed)
    ids = [root_id(tid)]
    rows = []
    for seq in range(1, n):
        parent = ids[0] if seq < 20 else rng.choice(ids[-2000:])
        st = rng.choice(STATUSES)
        sp = round(rng.lognormvariate(0, 0.5), 3) if st == "correct" else None
        reward = 0.4 + 1.2 * (min(max(sp, 0.1), 10) - 0.1) / 9.9 if sp else (0.05 if st in ("wrong_output",
                                                                                            "nan_output") else 0.0)
        nid = f"{tid}-{seq}"
        ids.append(nid)
        rows.append((nid, tid, parent, seq, "small" if seq % 3 else "large", f"# kernel {seq}\n" + "x = 1\n" * 40,
                     f"h{seq}", st, None, f"status: {st}", sp, reward, "bench", time.time(), seq + 1))
    with store.tx() as c:
        c.executemany("INSERT INTO nodes (id, task_id, parent_id, seq, action, source, source_hash, status, result,"
                      " feedback, speedup, reward, created_by, created_at, version)"
                      " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        c.execute("UPDATE tasks SET version = ? WHERE id = ?", (n + 1, tid))
    store.close()
    return tid


RULE_TOPICS = ["tl.float32(x)", "tl.arange with a runtime bound", "tl.dot on 8x8 tiles", "a Python if on a tensor",
               "max() on tensors", "torch.* inside a kernel", "print inside a kernel", "break in a kernel loop",
               "an unmasked tl.load at the row end", "tl.sum over a non-constexpr axis"]


def seed_memory(db: Path) -> None:
    """A realistic memory: 40 rules, 10 of them active, so expand_node ranks and renders them."""
    from adaexplore.skills.skill_store import SkillStore

    mem = SkillStore(db)
    for k in range(40):
        topic = RULE_TOPICS[k % len(RULE_TOPICS)]
        mem.record_rule(text=f"Do not use {topic} (variant {k}); write the supported form instead.",
                        who="bench", task_id=f"task{k % 4}")


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def measure(mcp, tid: str, calls: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"expand_node": [], "best_candidates": [], "tree_summary": []}
    async with Client(mcp) as c:
        for name, args in (("expand_node", {"task_id": tid}), ("best_candidates", {"task_id": tid, "k": 5}),
                           ("tree_summary", {"task_id": tid})):
            for i in range(calls + 5):
                t0 = time.perf_counter()
                r = await c.call_tool(name, args)
                dt = (time.perf_counter() - t0) * 1000
                assert not r.is_error, r.content
                if i >= 5:  # warm-up: first cache fill
                    out[name].append(dt)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        cfg = ServerConfig(data_dir=Path(d), seed=0)
        t0 = time.perf_counter()
        tid = build_tree(cfg.db_path, args.nodes)
        print(f"built {args.nodes} nodes in {time.perf_counter() - t0:.1f}s")
        mcp, svc = build_server(cfg, evaluator=NoEvaluator())
        seed_memory(cfg.db_path)
        try:
            res = anyio.run(measure, mcp, tid, args.calls)
        finally:
            svc.close()
    ok = True
    for name, xs in res.items():
        p50, p99 = pct(xs, 50), pct(xs, 99)
        target = name != "tree_summary"
        ok &= (p99 < 20) or not target
        print(f"{name:16} p50 {p50:6.2f} ms   p99 {p99:6.2f} ms   ({len(xs)} calls){'  target p99 < 20 ms' if target else ''}")
    print("PASS" if ok else "FAIL")


if __name__ == "__main__":
    main()
