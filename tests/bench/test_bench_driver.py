"""What the driver sends for each method and each failure, against a recording stand-in for the server."""

import anyio
import pytest

from adaexplore.server.bench.driver import Driver, Limits
from adaexplore.server.bench.endpoint import Answer
from adaexplore.server.bench.settings import Budget, Method
from adaexplore.server.bench.state import VariantState

KERNEL = "```python\nclass ModelNew:\n    pass\n```"


class Server:
    """Answers tools from a table and records every call."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    async def call(self, name, args):
        self.calls.append((name, {k: v for k, v in args.items() if v is not None}))
        a = self.answers[name]
        return a(args) if callable(a) else dict(a)

    async def prompt(self, name, args):
        return f"the {name} prompt for {args['task_id']}"


class Model:
    def __init__(self, *texts):
        self.texts, self.asked = list(texts), []

    async def ask(self, system, user):
        self.asked.append(user)
        return Answer(text=self.texts.pop(0) if self.texts else KERNEL, tokens=10)


def answers(**extra):
    seq = iter(range(1, 100))

    def evaluate(args):
        return {"node_id": f"n{next(seq)}", "status": "compile_error", "feedback": "status: compile_error"}

    base = {"register_task": {"task_id": "t", "root_node_id": "t-0", "facts": None},
            "get_skill_memory": {"rendered": "RULES TO FOLLOW"},
            "evaluate_kernel": evaluate,
            "record_failure": {"rule_id": "r-new", "merged": False, "closest": []},
            "best_candidates": {"candidates": []},
            "get_node": lambda a: {"node_id": a["node_id"], "status": "compile_error", "code": "x = 1"},
            "expand_node": {"expansion_id": "e1", "action": "small", "instructions": "refine",
                            "parent": {"node_id": "n9"}, "memory": "EXPAND MEMORY"}}
    base.update(extra)
    return base


def drive(tmp_path, method, memory, server, model, steps=2):
    d = Driver(server, model, VariantState(tmp_path, "v"), method, memory, Limits(Budget(steps=steps)))
    anyio.run(d.run_task, "softmax", "class Model: ...", 1)
    return [args for name, args in server.calls if name == "evaluate_kernel"]


def test_sample_writes_every_kernel_from_the_root(tmp_path):
    evals = drive(tmp_path, Method.sample, False, Server(answers()), Model())
    assert evals == [{"task_id": "t", "source": "class ModelNew:\n    pass\n"}] * 2


def test_chain_refines_the_last_node_while_none_is_correct_then_the_best(tmp_path):
    best = iter([{"candidates": []}, {"candidates": []}, {"candidates": [{"node_id": "n1"}]}])
    server = Server(answers(best_candidates=lambda a: next(best)))
    evals = drive(tmp_path, Method.chain, False, server, Model(), steps=3)
    assert [e.get("parent_node_id") for e in evals] == [None, "n1", "n1"]


def test_tree_sends_the_kernel_back_with_its_expansion_and_hides_the_memory_when_it_is_off(tmp_path):
    model = Model()
    evals = drive(tmp_path, Method.tree, False, Server(answers()), model, steps=1)
    assert evals[0]["expansion_id"] == "e1" and "parent_node_id" not in evals[0]
    assert "EXPAND MEMORY" not in model.asked[0]


def test_without_memory_no_memory_tool_is_called(tmp_path):
    server = Server(answers())
    drive(tmp_path, Method.sample, False, server, Model())
    assert not {"get_skill_memory", "record_failure"} & {name for name, _ in server.calls}


def test_with_memory_the_rules_reach_the_prompt_and_a_failure_becomes_a_rule(tmp_path):
    server, model = Server(answers()), Model(KERNEL, "Rule: use x.to(tl.float32), not tl.float32(x).")
    drive(tmp_path, Method.sample, True, server, model, steps=1)
    assert "RULES TO FOLLOW" in model.asked[0]
    assert ("record_failure", {"rule": "use x.to(tl.float32), not tl.float32(x).", "node_id": "n1"}) in server.calls


@pytest.mark.parametrize("verdict, same_as", [("r-7", "r-7"), ("none", None)])
def test_a_rule_the_model_judges_the_same_as_a_closest_one_is_sent_again_with_same_as(tmp_path, verdict, same_as):
    close = {"rule_id": "r-new", "merged": False, "closest": [{"rule_id": "r-7", "text": "cast with .to", "why": "x"}]}
    server = Server(answers(record_failure=close))
    model = Model(KERNEL, "Rule: cast with .to(), not by calling the dtype.", verdict)
    drive(tmp_path, Method.sample, True, server, model, steps=1)
    sent = [a for name, a in server.calls if name == "record_failure"]
    assert [a.get("same_as") for a in sent] == ([None, same_as] if same_as else [None])
    assert "r-7: cast with .to" in model.asked[2]
