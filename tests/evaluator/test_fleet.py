"""One pool per GPU: where each candidate goes, where each task's reference lives, and that the
members start together and time on their own GPUs without waiting for each other."""

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import EXAMPLES, example_task, gpu

from adaexplore.evaluator.evaluator import Evaluator, default_parallel, usable_cores
from adaexplore.evaluator.fleet import REFERENCE_COST, Dispatch, EvaluatorFleet, Placement, physical_ids, place
from adaexplore.evaluator.results import ErrorInfo, EvalResult, Status, TaskValidation
from adaexplore.evaluator.sandbox import confine
from adaexplore.evaluator.sandbox.gpu_lock import GpuLock, physical_gpu_id

# --- the dispatch rule, over plain data --------------------------------------------------------


def test_a_new_task_goes_to_the_shortest_queue_and_builds_its_reference_there():
    assert place([3, 1, 2], homes=set()) == Placement(member=1, builds_reference=True)


def test_new_tasks_on_equal_queues_go_to_the_member_holding_the_fewest_references():
    assert place([0, 0, 0], homes=set(), tasks_held=[2, 1, 1]) == Placement(1, True)
    assert place([0, 0], homes=set()) == Placement(0, True)  # then the lowest index


def test_a_candidate_goes_where_its_reference_lives_while_that_queue_is_not_clearly_longer():
    assert place([2, 0], homes={0}) == Placement(0, False)
    assert place([REFERENCE_COST, 0], homes={0}) == Placement(0, False)


def test_a_second_member_builds_the_reference_only_when_waiting_costs_more_than_building():
    assert place([REFERENCE_COST + 1, 0], homes={0}) == Placement(1, True)
    assert place([5, 0], homes={0}, reference_cost=8) == Placement(0, False)


def test_a_task_living_on_two_members_goes_to_the_shorter_of_their_queues():
    assert place([4, 2, 0], homes={0, 1}, reference_cost=2) == Placement(1, False)
    assert place([4, 2, 0], homes={0, 1}, reference_cost=1) == Placement(2, True)


def test_a_fleet_without_members_is_refused():
    with pytest.raises(ValueError):
        place([], homes=set())
    with pytest.raises(ValueError):
        Dispatch(0)


def test_dispatch_counts_each_job_in_its_members_queue_until_it_is_released():
    d = Dispatch(2)
    first = d.acquire(("t1", "p"))
    assert first == Placement(0, True) and d.queues == [1, 0] and d.homes[("t1", "p")] == {0}
    assert d.acquire(("t2", "p")) == Placement(1, True)  # a second task's reference goes elsewhere
    assert d.acquire(("t1", "p")) == Placement(0, False)
    d.release(0)
    d.release(0)
    d.release(1)
    assert d.queues == [0, 0] and d.tasks_held() == [1, 1]
    d.forget(("t1", "p"), 0)
    assert d.homes[("t1", "p")] == set()


# --- the fleet, over stand-in members ----------------------------------------------------------


class Stub:
    """Stands in for an Evaluator bound to one device."""

    def __init__(self, device, delay=0.0, gate: threading.Event | None = None, broken_reference=False):
        self.device = device
        self.delay = delay
        self.gate = gate
        self.broken_reference = broken_reference
        self.seen = []
        self.validated = []
        self._results = {}

    def cached(self, task, source, protocol=None):
        return self._results.get(source)

    def evaluate(self, task, source, protocol=None):
        self.seen.append((task.name, source))
        if self.gate is not None:
            self.gate.wait(10)
        time.sleep(self.delay)
        if self.broken_reference:
            return EvalResult(status=Status.infra_error, device=self.device,
                              error=ErrorInfo(error_class="ReferenceError", message="the task's reference failed"))
        result = EvalResult(status=Status.correct, device=self.device)
        self._results[source] = result
        return result

    def validate_task(self, task):
        self.validated.append(task.name)
        return TaskValidation(ok=True, device=self.device)

    def close(self):
        pass


def test_candidates_of_a_task_go_to_the_member_that_validated_it():
    stubs = [Stub("cuda:0"), Stub("cuda:1")]
    fleet = EvaluatorFleet(members=stubs)
    softmax, gelu = example_task("softmax"), example_task("gelu_scale")
    assert fleet.validate_task(softmax).ok and fleet.validate_task(gelu).ok
    assert [s.validated for s in stubs] == [["softmax"], ["gelu_scale"]]  # one reference each, spread out
    for i in range(4):
        fleet.evaluate(softmax, f"softmax {i}")
        fleet.evaluate(gelu, f"gelu {i}")
    assert {name for name, _ in stubs[0].seen} == {"softmax"}
    assert {name for name, _ in stubs[1].seen} == {"gelu_scale"}
    assert fleet.dispatch.queues == [0, 0]


def test_a_task_spills_to_a_second_member_only_when_its_home_queue_is_clearly_longer():
    gate = threading.Event()
    stubs = [Stub("cuda:0", gate=gate), Stub("cuda:1", gate=gate)]
    fleet = EvaluatorFleet(members=stubs)
    task = example_task("softmax")
    with ThreadPoolExecutor(8) as ex:
        futures = []
        for i in range(REFERENCE_COST + 2):
            futures.append(ex.submit(fleet.evaluate, task, f"src{i}"))
            while sum(fleet.dispatch.queues) < i + 1:  # each is placed before the next comes
                time.sleep(0.01)
        queues = list(fleet.dispatch.queues)
        gate.set()
        results = [f.result(10) for f in futures]
    assert queues == [REFERENCE_COST + 1, 1]  # the home took all it could before a second one built
    assert all(r.status is Status.correct for r in results)
    assert fleet.dispatch.homes[(task.task_id, task.protocol.key())] == {0, 1}


def test_an_identical_resubmission_is_answered_by_whichever_member_ran_it():
    stubs = [Stub("cuda:0"), Stub("cuda:1")]
    fleet = EvaluatorFleet(members=stubs)
    task = example_task("softmax")
    fleet.evaluate(task, "src")
    before = sum(len(s.seen) for s in stubs)
    assert fleet.evaluate(task, "src").status is Status.correct
    assert sum(len(s.seen) for s in stubs) == before
    assert fleet.devices == ["cuda:0", "cuda:1"] and fleet.device == "cuda:0"


def test_a_member_whose_reference_failed_is_no_home_of_the_task():
    stubs = [Stub("cuda:0", broken_reference=True), Stub("cuda:1")]
    fleet = EvaluatorFleet(members=stubs)
    task = example_task("softmax")
    assert fleet.evaluate(task, "src").status is Status.infra_error
    assert fleet.dispatch.homes[(task.task_id, task.protocol.key())] == set()


def test_the_fleet_launches_every_member_before_it_waits_for_any():
    events = []

    class Booting(Stub):
        def launch(self):
            events.append(("launch", self.device))

        def start(self):
            events.append(("ready", self.device))

    fleet = EvaluatorFleet(members=[Booting(f"cuda:{i}") for i in range(3)])
    fleet.start()
    assert [e for e, _ in events] == ["launch"] * 3 + ["ready"] * 3


def test_validating_on_every_member_gives_each_gpu_its_own_reference():
    stubs = [Stub("cuda:0"), Stub("cuda:1")]
    fleet = EvaluatorFleet(members=stubs)
    assert all(v.ok for v in fleet.validate_all(example_task("softmax")))
    assert [s.validated for s in stubs] == [["softmax"], ["softmax"]]


# --- members on their own GPUs ------------------------------------------------------------------


def test_physical_gpu_ids_follow_narrowed_visibility():
    assert physical_ids(["cuda:0", "cuda:1"], None) == ["0", "1"]
    assert physical_ids(["cuda:0", "cuda:1"], "3,5") == ["3", "5"]
    assert physical_ids(["cuda:1"], "GPU-aaa,GPU-bbb") == ["GPU-bbb"]
    with pytest.raises(ValueError):
        physical_ids(["cuda:2"], "3,5")
    # the lock of a narrowed pool names the physical GPU, not the worker's cuda:0
    assert physical_gpu_id("cuda:1", "3,5", pool_visible="5") == "5"
    assert physical_gpu_id("cuda:1", "3,5") == "5"
    assert physical_gpu_id("cuda:0", None) == "0"
    assert physical_gpu_id("cuda:0", "MIG-1/2/3") == "MIG-1_2_3"
    assert physical_gpu_id("cpu", "3") == "cpu"


def gpu_information(root, bus: str, minor: int, uuid: str) -> None:
    (root / bus).mkdir(parents=True)
    (root / bus / "information").write_text(
        f"Model: \t\t NVIDIA H200\nIRQ:   \t\t 42\nGPU UUID: \t\t {uuid}\nDevice Minor: \t\t {minor}\n")


def test_a_gpu_is_found_in_the_drivers_list_by_index_in_bus_order_or_by_uuid(tmp_path):
    gpu_information(tmp_path, "0000:cb:00.0", 1, "GPU-bbbb")
    gpu_information(tmp_path, "0000:1b:00.0", 0, "GPU-aaaa")
    assert confine.gpu_node("0", tmp_path) == confine.GpuNode(0, "GPU-aaaa")
    assert confine.gpu_node("1", tmp_path) == confine.GpuNode(1, "GPU-bbbb")
    assert confine.gpu_node("GPU-bbbb", tmp_path) == confine.GpuNode(1, "GPU-bbbb")
    assert confine.gpu_node("2", tmp_path) is None
    assert confine.gpu_node("MIG-1/2/3", tmp_path) is None
    assert confine.gpu_node("0", tmp_path / "no-driver") is None


def test_a_member_on_a_listed_gpu_shows_its_workers_that_gpu_alone_and_names_it_by_uuid(tmp_path, monkeypatch):
    # A worker shown only /dev/nvidia1 sees one GPU, which CUDA numbers 0: the index the host
    # uses ("1") would name no GPU there, the UUID names it however the driver counts.
    drivers = tmp_path / "gpus"
    gpu_information(drivers, "0000:1b:00.0", 0, "GPU-aaaa")
    gpu_information(drivers, "0000:cb:00.0", 1, "GPU-bbbb")
    real = confine.gpu_node
    monkeypatch.setattr(confine, "gpu_node", lambda ident: real(ident, drivers))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fleet = EvaluatorFleet(devices=["cuda:0", "cuda:1"], work_dir=tmp_path, lock_dir=tmp_path / "locks")
    try:
        assert [m.gpu_minors for m in fleet.members] == [[0], [1]]
        assert [m.pool.visible_devices for m in fleet.members] == ["GPU-aaaa", "GPU-bbbb"]
        assert [m.judge.visible_devices for m in fleet.members] == ["GPU-aaaa", "GPU-bbbb"]
        assert [m.job_device for m in fleet.members] == ["cuda:0", "cuda:0"]
        assert [m.physical_id for m in fleet.members] == ["0", "1"]  # the lock keeps the host's index
    finally:
        fleet.close()


def test_fleet_members_see_only_their_gpu_and_share_the_cores(tmp_path, monkeypatch):
    # Built for two fake GPUs without starting anything: each pool is narrowed to one physical id.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    monkeypatch.delenv("ADAEXPLORE_BASELINES", raising=False)  # the GPU default is under test
    fleet = EvaluatorFleet(devices=["cuda:0", "cuda:1"], work_dir=tmp_path, lock_dir=tmp_path / "locks")
    try:
        assert [m.pool.visible_devices for m in fleet.members] == ["4", "6"]
        assert [m.job_device for m in fleet.members] == ["cuda:0", "cuda:0"]
        assert [m.physical_id for m in fleet.members] == ["4", "6"]
        assert [m.device for m in fleet.members] == ["cuda:0", "cuda:1"]
        assert all(m.baselines == ("eager", "compile") for m in fleet.members)
        assert all(m.cores == max(1, len(os.sched_getaffinity(0)) // 2) for m in fleet.members)
    finally:
        fleet.close()
    cpu = EvaluatorFleet(devices=["cpu"], work_dir=tmp_path)
    try:
        assert len(cpu.members) == 1 and cpu.members[0].pool.visible_devices is None
        assert cpu.members[0].baselines == ("eager",)
    finally:
        cpu.close()


def test_slots_and_cores_follow_the_cores_this_process_may_run_on(monkeypatch):
    # A container's or taskset's share of a larger machine, not the machine's count.
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert usable_cores() == 3
    assert default_parallel(True) == 3 and default_parallel(True, members=2) == 1


def test_each_member_times_under_the_lock_of_its_own_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    (tmp_path / "locks").mkdir()
    fleet = EvaluatorFleet(devices=["cuda:0", "cuda:1"], work_dir=tmp_path, lock_dir=tmp_path / "locks")
    try:
        both = threading.Event()

        def time_on_both():
            with fleet.members[0].gpu_lock(), fleet.members[1].gpu_lock():
                both.set()

        threading.Thread(target=time_on_both, daemon=True).start()
        assert both.wait(10), "a timing on one GPU held up the other"
        assert [m.gpu.path.name for m in fleet.members] == ["gpu-4.lock", "gpu-6.lock"]
    finally:
        fleet.close()


def on_fake_gpu(ev: Evaluator, ident: str) -> Evaluator:
    """A CPU evaluator that takes the lock of GPU `ident`, as a member bound to that GPU does."""
    ev.runner.physical_id = ident
    ev.runner.gpu = GpuLock(ev.lock_dir, ident, pause=ev.pool.pause, resume=ev.pool.resume)
    return ev


def test_a_timing_on_one_gpu_does_not_hold_up_the_other_members_work(tmp_path):
    locks = tmp_path / "locks"
    locks.mkdir()
    members = [on_fake_gpu(Evaluator(device="cpu", work_dir=tmp_path / f"m{i}", cpu_timing=True,
                                     baselines=("eager",), max_parallel=1, lock_dir=locks), str(i))
               for i in range(2)]
    fleet = EvaluatorFleet(members=members)
    task = example_task("gelu_scale", warmup_runs=1, timed_runs=3)
    source = (EXAMPLES / "kernels" / "gelu_scale.py").read_text()
    other_process = GpuLock(locks, "0")  # someone else times on GPU 0 all along
    try:
        fleet.start()
        assert all(m.pool.warm_parent_pid() for m in members)  # both up before any job
        with ThreadPoolExecutor(1) as ex:
            with other_process.exclusive():
                waiting = ex.submit(members[0].evaluate, task, source)
                ran = members[1].evaluate(task, source + "\n# on gpu 1\n")
                assert ran.status is Status.correct and ran.timing is not None, ran.feedback()
                assert not waiting.done()  # GPU 0's member waits for its own GPU only
            late = waiting.result(600)
        assert late.status is Status.correct and late.timing is not None, late.feedback()
    finally:
        fleet.close()


@gpu
def test_fleet_over_visible_gpus_keeps_each_task_on_one_gpu_and_uses_them_all(tmp_path):
    tasks = [example_task("gelu_scale"), example_task("softmax")]
    sources = {t.name: (EXAMPLES / "kernels" / f"{t.name}.py").read_text() for t in tasks}
    with EvaluatorFleet(work_dir=tmp_path, baselines=("eager",)) as fleet:
        jobs = [(t, sources[t.name] + f"\n# {i}\n") for i in range(2) for t in tasks]
        with ThreadPoolExecutor(4) as ex:
            results = list(ex.map(lambda job: (job[0].name, fleet.evaluate(*job)), jobs))
        assert all(r.status is Status.correct and r.timing is not None for _, r in results)
        per_task = {name: {r.device for n, r in results if n == name} for name, _ in results}
        assert all(len(devices) == 1 for devices in per_task.values())
        if len(fleet.devices) > 1:
            assert len({d for devices in per_task.values() for d in devices}) == 2


@gpu
def test_an_evaluator_on_the_last_gpu_of_the_machine_judges_there(tmp_path):
    import torch

    last = f"cuda:{torch.cuda.device_count() - 1}"
    task = example_task("gelu_scale")
    with Evaluator(device=last, work_dir=tmp_path, baselines=("eager",)) as ev:
        result = ev.evaluate(task, (EXAMPLES / "kernels" / "gelu_scale.py").read_text())
    assert result.status is Status.correct and result.timing is not None, result.feedback()
    assert result.device == last
