"""Pairwise precision and recall of skill-memory merging on a labeled corpus.

Each corpus item is a failure message (recorded as an experience, clustered by its
signature) or a rule sentence (recorded as a rule, merged by ``match_rule``); a rule that
comes with an error excerpt links that failure signature to itself, so messages with that
signature join the rule's cluster. Every pair of items is scored: predicted same cluster
against true same group. Items are fed in several seeded orders, because merging is
order-dependent. Both precision and recall must reach ``--bar`` (0.9) in EVERY order.

    python benchmarks/memory_merge.py [--corpus PATH] [--orders 5] [--bar 0.9]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from adaexplore.skills.signature import signature
from adaexplore.skills.store import MemoryStore

DEFAULT_CORPUS = Path(__file__).parent / "data" / "memory_corpus.json"


def cluster(items: list[dict], order: list[int], db_path: str) -> list[str]:
    """The predicted cluster label of every item, fed to a fresh store in ``order``."""
    store = MemoryStore(db_path)
    exp_ids: dict[int, str] = {}
    labels: dict[int, str] = {}
    for i in order:
        item = items[i]
        if item["kind"] == "message":
            exp_ids[i] = store.record_experience(task_id=f"task-{i}", node_id=f"node-{i}", status=item["status"],
                                                 error_class=item["error_class"], message=item["message"], who="bench")
        else:
            out = store.record_rule(text=item["text"], who=f"agent-{i % 4}", task_id=f"task-{i}",
                                    error_excerpt=item.get("excerpt"))
            labels[i] = out.rule_id
    for i, rule_id in labels.items():  # a rule recorded early may since have been folded into another
        labels[i] = store.resolve(rule_id)
    for i, exp in exp_ids.items():
        rule = store.experience_rule(exp)
        labels[i] = rule or "sig:" + signature(items[i]["error_class"], items[i]["message"])
    return [labels[i] for i in range(len(items))]


def pairwise(truth: list[str], pred: list[str]) -> tuple[float, float, int, int, int]:
    tp = fp = fn = 0
    for a, b in itertools.combinations(range(len(truth)), 2):
        same_true, same_pred = truth[a] == truth[b], pred[a] == pred[b]
        tp += same_true and same_pred
        fp += same_pred and not same_true
        fn += same_true and not same_pred
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, tp, fp, fn


def describe_errors(items: list[dict], truth: list[str], pred: list[str]) -> list[str]:
    """Clusters mixing groups, and groups split over clusters."""
    lines = []
    by_pred, by_true = defaultdict(list), defaultdict(list)
    for i, (t, p) in enumerate(zip(truth, pred)):
        by_pred[p].append(i)
        by_true[t].append(i)
    short = lambda i: (items[i].get("text") or items[i]["message"]).replace("\n", " ")[:90]
    for p, members in sorted(by_pred.items()):
        groups = sorted({truth[i] for i in members})
        if len(groups) > 1:
            lines.append(f"MIXED cluster {p}: groups {groups}")
            lines += [f"    [{truth[i]}] {short(i)}" for i in members]
    for t, members in sorted(by_true.items()):
        clusters = defaultdict(list)
        for i in members:
            clusters[pred[i]].append(i)
        if len(clusters) > 1:
            lines.append(f"SPLIT group {t} over {len(clusters)} clusters")
            for p, ms in clusters.items():
                lines += [f"    {p}: {short(i)}" for i in ms]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--orders", type=int, default=5, help="number of seeded item orders (order 0: corpus order)")
    ap.add_argument("--show", type=int, default=1, help="print the wrong clusters of this many orders")
    ap.add_argument("--bar", type=float, default=0.9, help="precision and recall every order must reach")
    args = ap.parse_args(argv)
    items = json.loads(Path(args.corpus).read_text())
    truth = [it["group"] for it in items]
    print(f"corpus: {len(items)} items, {len(set(truth))} groups "
          f"({sum(it['kind'] == 'message' for it in items)} messages, {sum(it['kind'] == 'rule' for it in items)} rules)")
    ps, rs = [], []
    for k in range(args.orders):
        order = list(range(len(items)))
        if k:
            random.Random(k).shuffle(order)
        with tempfile.TemporaryDirectory() as tmp:
            pred = cluster(items, order, str(Path(tmp) / "memory.db"))
        p, r, tp, fp, fn = pairwise(truth, pred)
        ps.append(p)
        rs.append(r)
        print(f"order {k}: precision {p:.4f} recall {r:.4f} (tp {tp}, fp {fp}, fn {fn}, {len(set(pred))} clusters)")
        if k < args.show:
            for line in describe_errors(items, truth, pred):
                print(line)
    mp, mr = sum(ps) / len(ps), sum(rs) / len(rs)
    print(f"mean precision {mp:.4f}  mean recall {mr:.4f}")
    print(f"worst order: precision {min(ps):.4f} (order {ps.index(min(ps))})  "
          f"recall {min(rs):.4f} (order {rs.index(min(rs))})")
    ok = min(ps) >= args.bar and min(rs) >= args.bar
    print(f"{'PASS' if ok else 'FAIL'}: precision and recall >= {args.bar} for every order")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
