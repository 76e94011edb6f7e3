"""Skill-memory benchmark: merge quality on the labeled corpus, proposals, and import speed under load.

Runs on the local machine (CPU only), each store in a temporary SQLite file:

1. Deterministic path: every rule of ``memory_corpus/rules.jsonl`` is recorded (with its error
   text when it has one) in several seeded orders; pairwise precision and recall of the
   resulting clusters against the group labels (worst order reported).
2. Proposal path: before each rule is recorded, the (at most 3) closest stored rules are asked
   for; when a rule of its group is already stored, is one of them among the closest? Then a
   scripted agent records every rule and, when the answer did not already put it with its group,
   confirms with ``same_as`` the first closest rule whose cluster holds its group (the labels
   play the agent's judgment); pairwise precision and recall of the result.
3. Import: an export of ``--import-rules`` rules is imported into a fresh memory (timed); then
   imported again into another fresh memory from a second process while this one times
   ``record_rule``, ``memory()`` and ``record_experience`` (what ``record_failure``,
   ``get_skill_memory`` and ``evaluate_kernel`` do) on the same file.

    python benchmarks/memory_merge.py [--orders 5] [--import-rules 3000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import random
import sys
import tempfile
import time
from pathlib import Path

from adaexplore.skills.store import MemoryStore

CORPUS = Path(__file__).parent / "memory_corpus" / "rules.jsonl"


def load(path: Path = CORPUS) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def excerpt(item: dict) -> str | None:
    return f"{item['error_class']}: {item['error']}" if item.get("error") else None


def pairwise(truth: list[str], pred: list[str], only: set[int] | None = None) -> tuple[float, float]:
    """Pairwise precision and recall of ``pred`` against ``truth`` (pairs touching ``only``, if given)."""
    tp = fp = fn = 0
    for a, b in itertools.combinations(range(len(truth)), 2):
        if only is not None and a not in only and b not in only:
            continue
        st, sp = truth[a] == truth[b], pred[a] == pred[b]
        tp += st and sp
        fp += sp and not st
        fn += st and not sp
    return (tp / (tp + fp) if tp + fp else 1.0), (tp / (tp + fn) if tp + fn else 1.0)


def record(store: MemoryStore, i: int, item: dict, **kw):
    return store.record_rule(text=item["text"], who=f"agent-{i % 5}", task_id=f"task-{i}",
                             error_excerpt=excerpt(item), **kw)


def later(items: list[dict]) -> set[int]:
    """The rules written after the concept thesaurus (see ``build_rules.py``)."""
    return {i for i, it in enumerate(items) if it.get("set") == "later"}


def deterministic(items: list[dict], order: list[int], db: str) -> tuple[float, float, float, float]:
    """Precision and recall over all pairs, then over the pairs that touch a later rule."""
    store = MemoryStore(db)
    ids = {i: record(store, i, items[i], closest_k=0).rule_id for i in order}
    pred = [store.resolve(ids[i]) for i in range(len(items))]
    truth = [it["group"] for it in items]
    return (*pairwise(truth, pred), *pairwise(truth, pred, later(items)))


def proposals(items: list[dict], order: list[int], db: str) -> dict:
    store = MemoryStore(db)
    ids: dict[int, str] = {}  # item -> the rule id its record answered

    def holds(rule_id: str, group: str, but: int) -> bool:
        root = store.resolve(rule_id)
        return any(items[j]["group"] == group and store.resolve(r) == root for j, r in ids.items() if j != but)

    asked = found = 0
    for i in order:
        item = items[i]
        if any(items[j]["group"] == item["group"] for j in ids):
            asked += 1
            close = store.closest_rules(item["text"], k=3)
            found += any(holds(c.rule_id, item["group"], i) for c in close)
        out = record(store, i, item)
        ids[i] = out.rule_id
        if not holds(out.rule_id, item["group"], i):
            pick = next((c for c in out.closest if holds(c.rule_id, item["group"], i)), None)
            if pick is not None:
                ids[i] = record(store, i, item, same_as=pick.rule_id, closest_k=0).rule_id
    pred = [store.resolve(ids[i]) for i in range(len(items))]
    p, r = pairwise([it["group"] for it in items], pred)
    return {"asked": asked, "found": found, "recall_at_3": found / asked if asked else 1.0,
            "agent_precision": p, "agent_recall": r}


def export_of(n: int, items: list[dict]) -> dict:
    """An export of ``n`` rules: corpus wordings on many tasks, each rule a distinct wording."""
    src = MemoryStore(Path(tempfile.mkdtemp()) / "src.db")
    rules = []
    for k in range(n):
        item = items[k % len(items)]
        text = item["text"] if k < len(items) else f"{item['text']} (noted on kernel family {k})"
        rid = f"r-{k:010d}"
        rules.append({"id": rid, "text": text, "created": 1.0 + k, "retired": False, "pinned": False,
                      "merged_into": None, "keys": [], "signatures": [],
                      "evidence": [{"task_id": f"t-{k}", "node_id": f"n-{k}", "who": f"agent-{k % 7}", "text": text,
                                    "error_excerpt": excerpt(item), "first_seen": 1.0 + k, "last_seen": 1.0 + k}],
                      "contradictions": []})
    doc = src.export()
    doc["rules"] = rules
    return doc


def _import_in_child(db: str, doc_path: str, started, done) -> None:
    store = MemoryStore(db)
    doc = json.loads(Path(doc_path).read_text())
    started.set()
    t0 = time.perf_counter()
    store.import_(doc, who="bench-import")
    done.value = time.perf_counter() - t0


def import_bench(n: int, items: list[dict]) -> dict:
    doc = export_of(n, items)
    tmp = Path(tempfile.mkdtemp())
    t0 = time.perf_counter()
    summary = MemoryStore(tmp / "a.db").import_(doc, who="bench")
    alone = time.perf_counter() - t0
    doc_path = tmp / "doc.json"
    doc_path.write_text(json.dumps(doc))
    db = str(tmp / "b.db")
    store = MemoryStore(db)
    for k in range(50):  # a memory in use
        store.record_rule(text=items[k]["text"], who="team", task_id=f"pre-{k}", closest_k=0)
    ctx = mp.get_context("spawn")
    done = ctx.Value("d", 0.0)
    started = ctx.Event()
    proc = ctx.Process(target=_import_in_child, args=(db, str(doc_path), started, done))
    proc.start()
    started.wait(120)  # the child has read the export: the import starts now
    lat = {"record_failure": [], "get_skill_memory": [], "evaluate_kernel_experience": []}
    k = 0
    while proc.is_alive():
        item = items[k % len(items)]
        t = time.perf_counter()
        store.record_rule(text=item["text"], who="live", task_id=f"live-{k}", error_excerpt=excerpt(item))
        lat["record_failure"].append(time.perf_counter() - t)
        t = time.perf_counter()
        store.memory(token_budget=1500)
        lat["get_skill_memory"].append(time.perf_counter() - t)
        t = time.perf_counter()
        store.record_experience(task_id=f"live-{k}", node_id=f"live-n-{k}", status="compile_error",
                                error_class=item.get("error_class") or "CompilationError",
                                message=item.get("error") or "compilation failed")
        lat["evaluate_kernel_experience"].append(time.perf_counter() - t)
        k += 1
    proc.join()
    return {"rules": n, "import_alone_s": round(alone, 2), "rules_added": summary.rules_added,
            "rules_merged": summary.rules_merged, "import_under_load_s": round(done.value, 2),
            "calls_during_import": k,
            **{f"max_{name}_s": round(max(v), 3) if v else None for name, v in lat.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--orders", type=int, default=5)
    ap.add_argument("--import-rules", type=int, default=3000)
    args = ap.parse_args()
    items = load()
    groups = len({it["group"] for it in items})
    print(f"corpus: {len(items)} rules in {groups} groups, {sum('error' in it for it in items)} with error text, "
          f"{len(later(items))} written later")
    tmp = Path(tempfile.mkdtemp())
    det, prop = [], []
    for seed in range(args.orders):
        order = list(range(len(items)))
        random.Random(seed).shuffle(order)
        det.append(deterministic(items, order, str(tmp / f"d{seed}.db")))
        prop.append(proposals(items, order, str(tmp / f"p{seed}.db")))
        print(f"order {seed}: deterministic P={det[-1][0]:.3f} R={det[-1][1]:.3f} (pairs with a later rule: "
              f"P={det[-1][2]:.3f} R={det[-1][3]:.3f}); closest-3 hit "
              f"{prop[-1]['found']}/{prop[-1]['asked']} ({prop[-1]['recall_at_3']:.3f}); scripted agent "
              f"P={prop[-1]['agent_precision']:.3f} R={prop[-1]['agent_recall']:.3f}")
    worst = {"det_precision": min(d[0] for d in det), "det_recall": min(d[1] for d in det),
             "det_precision_later": min(d[2] for d in det), "det_recall_later": min(d[3] for d in det),
             "recall_at_3": min(x["recall_at_3"] for x in prop),
             "agent_precision": min(x["agent_precision"] for x in prop),
             "agent_recall": min(x["agent_recall"] for x in prop)}
    print("worst over orders: " + ", ".join(f"{k}={v:.3f}" for k, v in worst.items()))
    imp = import_bench(args.import_rules, items)
    print("import: " + json.dumps(imp))
    ok = (worst["det_precision"] >= 0.95 and worst["det_recall"] >= 0.7 and worst["recall_at_3"] >= 0.95
          and worst["agent_precision"] >= 0.95 and worst["agent_recall"] >= 0.9 and imp["import_alone_s"] < 10
          and all(imp[f"max_{n}_s"] is None or imp[f"max_{n}_s"] < 1.0
                  for n in ("record_failure", "get_skill_memory", "evaluate_kernel_experience")))
    print("all bars met" if ok else "SOME BARS NOT MET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
