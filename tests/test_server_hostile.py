"""Malformed and oversized arguments at every tool: each is a tool error, the server stays up,
and the database stays consistent."""

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from adaexplore.server.app import build_server
from adaexplore.server.config import ServerConfig
from server_support import SOFTMAX

BIG = "y" * (256 * 1024 + 10)
# Non-finite floats are left out: the client sends them as JSON null, which an optional argument accepts.
junk = st.one_of(st.none(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.lists(st.integers(), max_size=3),
                 st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))
bad_id = st.one_of(st.text(max_size=40).filter(lambda s: "-" not in s or not s.strip()), st.just(BIG[:200]), junk)


def cases(tid: str):
    """(tool, arguments) that must each be rejected."""
    edit = st.fixed_dictionaries({"old": st.text(max_size=20).map(lambda s: s + "\x00never\x00"), "new": st.text(max_size=5)})
    return st.one_of(
        st.tuples(st.just("get_node"), st.fixed_dictionaries({"node_id": bad_id})),
        st.tuples(st.just("get_node"), st.fixed_dictionaries({"node_id": st.just(f"{tid}-0"), "include_code": junk.filter(
            lambda v: not isinstance(v, bool) and v is not None and v not in (0, 1))})),
        st.tuples(st.just("tree_summary"), st.fixed_dictionaries({"task_id": bad_id})),
        st.tuples(st.just("tree_summary"), st.fixed_dictionaries({"task_id": st.just(tid),
                                                                  "top": st.integers().filter(lambda v: not 1 <= v <= 50)})),
        st.tuples(st.just("expand_node"), st.fixed_dictionaries({"task_id": bad_id})),
        st.tuples(st.just("best_candidates"), st.fixed_dictionaries({"task_id": st.just(tid),
                                                                     "k": st.integers().filter(lambda v: not 1 <= v <= 50)})),
        st.tuples(st.just("evaluate_kernel"), st.fixed_dictionaries({"task_id": st.just(tid), "source": st.just(BIG)})),
        st.tuples(st.just("evaluate_kernel"), st.fixed_dictionaries({"task_id": st.just(tid), "parent_node_id":
                                                                     st.just(f"{tid}-0"), "edits": st.lists(edit, min_size=1, max_size=3)})),
        st.tuples(st.just("evaluate_kernel"), st.fixed_dictionaries({"task_id": st.just(tid), "edits": junk.filter(
            lambda v: v is not None)})),
        st.tuples(st.just("evaluate_kernel"), st.fixed_dictionaries({"task_id": bad_id, "source": st.text(max_size=50)})),
        st.tuples(st.just("evaluate_kernel"), st.fixed_dictionaries({"task_id": st.just(tid), "source": st.text(max_size=30),
                                                                     "expansion_id": st.text(max_size=30).filter(
                                                                         # the SDK reads the string "null" as JSON null,
                                                                         # which means "no expansion" and is valid
                                                                         lambda v: v.strip() != "null")})),
        st.tuples(st.just("register_task"), st.fixed_dictionaries({"source": st.text(max_size=200)})),
        st.tuples(st.just("register_task"), st.fixed_dictionaries({"source": st.just(SOFTMAX), "search": st.fixed_dictionaries(
            {"c_explore": st.floats(max_value=-0.01, allow_infinity=False) | st.just("x")})})),
        st.tuples(st.just("register_task"), st.fixed_dictionaries({"source": st.just(BIG)})),
        st.tuples(st.just("record_failure"), st.fixed_dictionaries({"rule": st.one_of(st.just(""), st.just(" \n"),
                                                                                     st.just(BIG[:5000]), junk)})),
        st.tuples(st.just("record_failure"), st.fixed_dictionaries({"rule": st.just("use x"), "node_id": bad_id.filter(
            lambda v: v is not None)})),
        st.tuples(st.just("get_skill_memory"), st.fixed_dictionaries({"token_budget": st.integers().filter(
            lambda v: not 50 <= v <= 20000)})),
        st.tuples(st.just("get_skill_memory"), st.fixed_dictionaries({"task_id": bad_id.filter(lambda v: v is not None)})),
        st.tuples(st.just("no_such_tool"), st.fixed_dictionaries({})),
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    mcp, svc = build_server(ServerConfig(data_dir=tmp_path_factory.mktemp("hostile")))
    tid = svc.register_task(source=SOFTMAX, path=None, name="softmax", search=None, protocol=None,
                            caller="local").task_id
    yield mcp, svc, tid
    svc.close()


@pytest.mark.slow
def test_hostile_arguments_are_tool_errors(server):
    mcp, svc, tid = server
    seen: list[tuple[str, bool, str]] = []

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=cases(tid))
    def run(case):
        name, args = case

        async def main():
            async with Client(mcp) as c:
                r = await c.call_tool(name, args)
                alive = await c.call_tool("list_tasks", {})
                return r, alive

        r, alive = anyio.run(main)
        assert r.is_error, (name, args, r.structured_content)
        text = r.content[0].text
        assert text and "Traceback" not in text
        assert text != f"Error executing tool {name}", f"a crash, not a caller error: {name} {args!r}"
        assert not alive.is_error
        seen.append((name, r.is_error, text))

    run()
    assert len({n for n, _, _ in seen}) >= 8
    conn = svc.store.conn()
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT COUNT(*) FROM nodes WHERE task_id = ? AND action != 'root'", (tid,)).fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 1
