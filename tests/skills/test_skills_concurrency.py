import multiprocessing as mp
import threading

from adaexplore.skills.skill_store import SkillStore

WORDINGS = [
    "Do not call tl.float32(x); use x.to(tl.float32)",
    "Never call tl.int32(v) to cast a value; use v.to(tl.int32) instead",
    "tl.float16(y) is not callable; convert with y.to(tl.float16)",
    "Do not call tl.bfloat16(t) to cast; write t.to(tl.bfloat16)",
]
ERROR = "TypeError: 'dtype' object is not callable"  # what every wording above explains: one lesson


def _record(db: str, prefix: str, n: int, barrier=None) -> None:
    store = SkillStore(db)
    if barrier is not None:
        barrier.wait()
    for i in range(n):
        store.record_rule(text=WORDINGS[i % len(WORDINGS)], who=prefix, task_id=f"{prefix}-task-{i}",
                          error_excerpt=ERROR)
        store.record_rule(text=WORDINGS[(i + 1) % len(WORDINGS)], who=prefix, task_id=f"{prefix}-task-{i}",
                          error_excerpt=ERROR)


def test_threads_one_rule_exact_count(tmp_path):
    db = str(tmp_path / "mem.db")
    SkillStore(db)
    barrier = threading.Barrier(8)
    threads = [threading.Thread(target=_record, args=(db, f"th{k}", 5, barrier)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rules = SkillStore(db).memory(include_candidates=True).rules
    assert len(rules) == 1
    assert rules[0].count == 40 and len(rules[0].tasks) == 40


def test_processes_and_threads_one_rule_exact_count(tmp_path):
    db = str(tmp_path / "mem.db")
    SkillStore(db)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_record, args=(db, f"proc{k}", 6)) for k in range(2)]
    for p in procs:
        p.start()
    threads = [threading.Thread(target=_record, args=(db, f"th{k}", 3)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    rules = SkillStore(db).memory(include_candidates=True).rules
    assert len(rules) == 1
    assert rules[0].count == 2 * 6 + 4 * 3
