"""What expand_node shows: siblings of the chosen parent, the task's facts, the method's context per step."""

import re

import pytest
from server_support import SOFTMAX, compile_error_kernel

from adaexplore.server.core.config import ServerConfig
from adaexplore.server.core.taskfacts import input_specs
from adaexplore.server.core.texts import change_summary
from adaexplore.server.core.tool_models import SearchOverrides
from adaexplore.server.face.app import build_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cfg = ServerConfig(data_dir=tmp_path_factory.mktemp("data"), wait_limit_s=120, seed=0)
    _, svc = build_server(cfg)
    yield svc
    svc.close()


def submit(svc, tid, source, parent_node_id=None, expansion_id=None):
    node_id, job, _ = svc.search.submit(task_id=tid, source=source, edits=None, caller="t",
                                 parent_node_id=parent_node_id, expansion_id=expansion_id)
    if job is not None:
        job.result(timeout=120)
    return node_id


def test_input_shapes_and_dtypes_are_read_from_get_inputs_without_running_it():
    src = ("import torch\nbatch_size = 16\ndim = 4 * 8\n"
           "def get_inputs():\n    x = torch.randn(batch_size, dim)\n"
           "    return [x, torch.randint(0, 10, (batch_size,)), torch.rand(2, 3, dtype=torch.float16), 7]\n")
    assert input_specs(src) == [
        {"shape": [16, 32], "dtype": "float32"},
        {"shape": [16], "dtype": "int64"},
        {"shape": [2, 3], "dtype": "float16"},
        {"shape": None, "dtype": "unknown"},
    ]


def test_every_expansion_states_inputs_outputs_tolerance_and_device(server):
    svc = server
    reg = svc.tasks.register_task(source=SOFTMAX, path=None, name="facts", search=None, protocol=None, caller="t")
    assert reg.facts is not None and reg.facts.inputs and reg.facts.reference_code is None
    exp = svc.search.expand(reg.task_id, "t")
    f = exp.task
    assert f is not None
    assert all(s.shape and s.dtype == "float32" for s in f.inputs)
    assert [o.shape for o in f.outputs] == reg.output_shapes and all(o.dtype == "float32" for o in f.outputs)
    assert "atol=0.01" in f.tolerance and "rtol=0.01" in f.tolerance
    assert f.device == "cpu"
    # the first step is a large step from the root: it gets the reference code
    assert exp.action == "large" and f.reference_code == SOFTMAX
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", exp.expires_at)


def test_a_large_step_is_shown_the_pool_and_the_reference_not_a_node_to_improve(server):
    svc = server
    reg = svc.tasks.register_task(source=SOFTMAX + "\n# large\n", path=None, name="large", search=None, protocol=None,
                            caller="t")
    exp = svc.search.expand(reg.task_id, "t")
    assert exp.action == "large"
    assert exp.parent is not None and exp.parent.code is None
    assert exp.task.reference_code is not None
    assert "node to improve" not in exp.instructions


def test_siblings_already_tried_from_the_chosen_parent_are_listed_with_their_change(server):
    svc = server
    reg = svc.tasks.register_task(source=SOFTMAX + "\n# siblings\n", path=None, name="sib",
                            search=SearchOverrides(c_expand=5.0), protocol=None, caller="t")
    tid = reg.task_id
    a = submit(svc, tid, compile_error_kernel("a"))
    b = submit(svc, tid, compile_error_kernel("b"))
    exp = svc.search.expand(tid, "t")  # a large c_expand widens the root
    assert exp.parent.node_id == reg.root_node_id
    assert [s.node_id for s in exp.siblings] == [a, b]
    for s in exp.siblings:
        assert s.status == "compile_error" and s.summary and s.change
    # children of a non-root parent show the lines they changed
    c = submit(svc, tid, compile_error_kernel("a") + "# tweak\nX = 1\n", parent_node_id=a)
    sib = svc.search.siblings(svc.tasks.index(tid)[0], a, svc.store.get_node(a).source)
    assert [s.node_id for s in sib] == [c] and "+ X = 1" in sib[0].change


def test_change_summary_says_what_changed_in_a_line():
    parent = "a = 1\nb = 2\nc = 3\nd = 4\n"
    assert change_summary(parent, "a = 1\nb = 5\nc = 3\nd = 4\n") == "- b = 2 | + b = 5"
    assert change_summary(None, "x") .startswith("rewritten")
    assert change_summary(parent, "totally\ndifferent\nfile\nhere\n").startswith("rewritten")


def test_small_steps_get_the_code_of_their_branch_history_within_the_token_budget(server):
    svc = server
    reg = svc.tasks.register_task(source=SOFTMAX + "\n# small\n", path=None, name="small",
                            search=SearchOverrides(p_large=0.0, c_expand=0.0, history_code_tokens=100_00),
                            protocol=None, caller="t")
    tid = reg.task_id
    a = submit(svc, tid, compile_error_kernel("h1"))
    b = submit(svc, tid, compile_error_kernel("h2"), parent_node_id=a)
    exp = svc.search.expand(tid, "t")
    assert exp.action == "small" and exp.parent.node_id == b
    assert exp.parent.code is not None
    assert [h.node_id for h in exp.history] == [a]  # the parent is `parent`, not a history entry too
    assert exp.history[0].code is not None  # the older node's code, within budget
    assert exp.task.reference_code is None  # small steps work from the parent


def test_every_search_parameter_can_be_set_per_task_and_the_method_defaults_hold(server):
    from adaexplore.search import SearchParams

    d = SearchParams()
    assert (d.c_explore, d.c_expand, d.p_large, d.c_recent, d.c_pool, d.pool_topup) == (0.3, 0.3, 0.2, 5, 5, False)
    tunable = set(SearchParams.model_fields) - {"step_budget"}
    assert tunable <= set(SearchOverrides.model_fields), tunable - set(SearchOverrides.model_fields)
    reg = server.tasks.register_task(source=SOFTMAX + "\n# params\n", path=None, name="params",
                               search=SearchOverrides(pool_topup=True, c_pool=3, c_recent=2, max_small_children=4),
                               protocol=None, caller="t")
    p, _, _ = server.tasks.params(reg.task_id)
    assert (p.pool_topup, p.c_pool, p.c_recent, p.max_small_children) == (True, 3, 2, 4)
