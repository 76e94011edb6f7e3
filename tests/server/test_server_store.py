"""The server's SQLite store and tree cache (no evaluator)."""

import os
import time

from adaexplore.server.core.tree_store import TreeStore, root_id
from adaexplore.server.core.treecache import TreeCache
from adaexplore.server.face.auth import StoreTokenVerifier, hash_token, issue_token


def make_task(store: TreeStore, tid: str = "t1") -> None:
    store.insert_task(task_id=tid, name="t", source="src", source_hash="h0", validation={}, flags=[], params={},
                      protocol={}, created_by="local", root_status="reference", root_speedup=None, root_reward=None,
                      root_result=None)


def test_nodes_sequence_duplicates_and_versions(tmp_path):
    store = TreeStore(tmp_path / "db.sqlite")
    make_task(store)
    assert not store.insert_task(task_id="t1", name="t", source="src", source_hash="h0", validation={}, flags=[],
                                 params={}, protocol={}, created_by="x", root_status="reference", root_speedup=None,
                                 root_reward=None, root_result=None)
    cache = TreeCache(store)
    v0, rows, _ = cache.rows("t1")
    assert [r.id for r in rows] == [root_id("t1")]
    a, created = store.create_node(task_id="t1", parent_id=root_id("t1"), action="large", source="a",
                                   source_hash="ha", created_by="me", expansion_id=None)
    assert created and a == "t1-1"
    dup, created = store.create_node(task_id="t1", parent_id=root_id("t1"), action="large", source="a",
                                     source_hash="ha", created_by="me", expansion_id=None)
    assert not created and dup == "t1-1"
    v1, rows, entry = cache.rows("t1")
    assert v1 > v0 and len(rows) == 2 and rows[1].status is None
    store.finish_node("t1-1", status="correct", result={"x": 1}, feedback="ok", speedup=2.0, reward=0.5)
    v2, rows, entry = cache.rows("t1")
    assert v2 > v1 and rows[1].status == "correct" and entry.depth["t1-1"] == 1
    assert store.best_nodes_rows("t1", 5)[0].id == "t1-1"


def test_infra_error_node_is_rerun_on_resubmission(tmp_path):
    store = TreeStore(tmp_path / "db.sqlite")
    make_task(store)
    store.create_node(task_id="t1", parent_id=root_id("t1"), action="large", source="a", source_hash="ha",
                      created_by="me", expansion_id=None)
    store.finish_node("t1-1", status="infra_error", result={}, feedback="lost", speedup=None, reward=None)
    node, created = store.create_node(task_id="t1", parent_id=root_id("t1"), action="large", source="a",
                                      source_hash="ha", created_by="me", expansion_id=None)
    assert created and node == "t1-1" and store.get_node("t1-1").status is None


def test_interrupted_evaluations_are_found(tmp_path):
    store = TreeStore(tmp_path / "db.sqlite")
    make_task(store)
    store.create_node(task_id="t1", parent_id=root_id("t1"), action="large", source="a", source_hash="ha",
                      created_by="me", expansion_id=None)
    assert store.interrupted_evaluations() == []  # we are alive
    store.conn().execute("UPDATE evaluations SET pid = 999999999")
    assert store.interrupted_evaluations() == ["t1-1"]


def test_expansions_expire(tmp_path):
    store = TreeStore(tmp_path / "db.sqlite")
    make_task(store)
    store.create_expansion(expansion_id="x1", task_id="t1", node_id=root_id("t1"), action="large", created_by="me",
                           ttl_s=60)
    assert len(store.open_expansions("t1", time.time())) == 1
    assert store.open_expansions("t1", time.time() + 61) == []


def test_tokens_hashed_and_revocable(tmp_path):
    import anyio

    store = TreeStore(tmp_path / "db.sqlite")
    token = issue_token(store, "alice", ["read", "write"])
    raw = store.conn().execute("SELECT hash FROM tokens").fetchone()[0]
    assert raw == hash_token(token) and token not in raw
    verifier = StoreTokenVerifier(store)
    got = anyio.run(verifier.verify_token, token)
    assert got.client_id == "alice" and got.scopes == ["read", "write"]
    assert store.revoke_token("alice")
    assert anyio.run(verifier.verify_token, token) is None


def test_two_processes_share_the_file(tmp_path):
    """Writers in several processes: no lost or duplicated seq."""
    import multiprocessing as mp

    store = TreeStore(tmp_path / "db.sqlite")
    make_task(store)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path / "db.sqlite"), i)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    seqs = [r[0] for r in store.conn().execute("SELECT seq FROM nodes WHERE task_id='t1' ORDER BY seq")]
    assert seqs == list(range(0, 61))


def _writer(path: str, k: int) -> None:
    store = TreeStore(path)
    for j in range(20):
        store.create_node(task_id="t1", parent_id="t1-0", action="large", source=f"{k}-{j}",
                          source_hash=f"{k}-{j}-{os.getpid()}", created_by="p", expansion_id=None)
