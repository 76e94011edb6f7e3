"""Malformed and oversized arguments at every tool: each is a tool error, the server stays up,
and the database stays consistent. A candidate whose own code fails with an OS error is judged
like any other failing candidate."""

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from server_support import SOFTMAX, variant

from adaexplore.server.core.config import ServerConfig
from adaexplore.server.face.app import build_server

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
    tid = svc.tasks.register_task(source=SOFTMAX, path=None, name="softmax", search=None, protocol=None,
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


OS_ERRORS = {
    "an unreadable file": ('raise PermissionError(13, "Permission denied", "/etc/shadow")',
                           "PermissionError: [Errno 13] Permission denied: '/etc/shadow'"),
    "a refusal without a file": ('raise PermissionError("not allowed to read the weights")',
                                 "PermissionError: not allowed to read the weights"),
    "a missing file": ('open("/no-such-dir/weights.bin", "rb")',
                       "FileNotFoundError: [Errno 2] No such file or directory: '/no-such-dir/weights.bin'"),
}


@pytest.fixture(scope="module")
def own_task(tmp_path_factory):
    """A server of its own, so that these nodes stay out of the hostile test's database."""
    mcp, svc = build_server(ServerConfig(data_dir=tmp_path_factory.mktemp("os-errors")))
    tid = svc.tasks.register_task(source=SOFTMAX, path=None, name="softmax", search=None, protocol=None,
                            caller="local").task_id
    yield mcp, tid
    svc.close()


@pytest.mark.slow
@pytest.mark.parametrize("case", list(OS_ERRORS))
def test_a_forward_that_raises_an_os_error_is_a_runtime_error_with_its_own_message_and_line(own_task, case):
    mcp, tid = own_task
    statement, message = OS_ERRORS[case]
    source = variant("04").replace("        x = x.contiguous()\n", f"        {statement}\n        x = x.contiguous()\n")
    line = source.splitlines().index(f"        {statement}") + 1

    async def main():
        async with Client(mcp) as c:
            return await c.call_tool("evaluate_kernel", {"task_id": tid, "source": source})

    r = anyio.run(main)
    assert not r.is_error, r.content[0].text
    out = r.structured_content
    assert out["status"] == "runtime_error", out["feedback"]
    assert message in out["feedback"]
    assert f"line {line}" in out["feedback"]
    assert "IncompleteRun" not in out["feedback"] and "exit code" not in out["feedback"]
