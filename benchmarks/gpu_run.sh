#!/usr/bin/env bash
# What runs on the GPU machine (see benchmarks/RESULTS.md). Usage: bash benchmarks/gpu_run.sh CASE [ARGS] (the cases below)
# The image has torch and Triton but not this project's other dependencies: they come as wheels
# in .whl/ (made by the device-wheels tool), installed into /tmp/site.
set -uo pipefail
python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  2>&1 | grep -v "^WARNING: Target directory" || true
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
# `on_half I CMD...`: CMD on GPU I of a two-GPU machine, confined to its half of the cores
# (one H200 machine's share: a GPU and 16 cores)
on_half() {
  local i=$1 half=$(( $(nproc --all) / 2 )); shift
  CUDA_VISIBLE_DEVICES=$i taskset -c $((i * half))-$((i * half + half - 1)) "$@"
}
python3 -c "import torch, triton, adaexplore.evaluator as e; print('torch', torch.__version__, 'triton', triton.__version__, e.__file__)" | tee -a "$out/device.txt"
case "${1:-tests}" in
  tests)  # the whole suite, GPU-only tests included; two workers (timings still exclusive:
    # every evaluator on the machine shares the per-GPU lock)
    timeout 585 python3 -m pytest -q -p no:cacheprovider -n 2 --dist loadfile -rfs --tb=short --durations=15 \
      tests 2>&1 | tee "$out/pytest_gpu.txt" | tail -60 ;;
  bench)  # throughput (warm vs cold) and timing fidelity
    timeout 300 python3 benchmarks/eval_throughput.py --quick --json-out "$out/throughput.json" \
      > "$out/throughput.md" 2> "$out/throughput.log"; cat "$out/throughput.md"; tail -5 "$out/throughput.log"
    timeout 250 python3 benchmarks/timing_fidelity.py --quick --json-out "$out/fidelity.json" \
      > "$out/fidelity.md" 2> "$out/fidelity.log"; cat "$out/fidelity.md"; tail -5 "$out/fidelity.log" ;;
  throughput)  # only the throughput run, with its full log
    timeout 540 python3 benchmarks/eval_throughput.py --quick --json-out "$out/throughput.json" \
      > "$out/throughput.md" 2> "$out/throughput.log"; cat "$out/throughput.md"; cat "$out/throughput.log" ;;
  round)  # throughput, then the tests of the evaluator's GPU paths (two workers)
    timeout 300 python3 benchmarks/eval_throughput.py --quick --json-out "$out/throughput.json" \
      > "$out/throughput.md" 2> "$out/throughput.log"; cat "$out/throughput.md"; grep -v "^\[" "$out/throughput.log" | tail -20
    timeout 250 python3 -m pytest -q -p no:cacheprovider -n 2 --dist loadfile -rfs --tb=short --durations=8 \
      tests/evaluator/test_gpu_lock.py tests/evaluator/test_worker_pool.py tests/evaluator/test_timing_protocol.py 2>&1 | tee "$out/pytest_gpu.txt" | tail -40 ;;
  fidelity)
    timeout 540 python3 benchmarks/timing_fidelity.py --json-out "$out/fidelity.json" \
      > "$out/fidelity.md" 2> "$out/fidelity.log"; cat "$out/fidelity.md"; tail -20 "$out/fidelity.log" ;;
  fleet)  # one GPU against two (needs two GPUs): the fleet's GPU tests (no run if they fail), the mix,
    # then the search-shaped level-2 workload (tasks from .kb/level2 with candidates in
    # benchmarks/candidates/level2; skipped if either is absent)
    timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE --tb=short tests/evaluator/test_fleet.py 2>&1 \
      | tee "$out/pytest_fleet.txt" | tail -8
    grep -qE "^[0-9]+ passed" "$out/pytest_fleet.txt" && ! grep -qE "[0-9]+ (failed|error)" "$out/pytest_fleet.txt" || exit 1
    timeout 240 python3 benchmarks/fleet_scaling.py --deadline-s 150 --json-out "$out/fleet.json" \
      > "$out/fleet.md" 2> "$out/fleet.log"; cat "$out/fleet.md"; tail -12 "$out/fleet.log"
    timeout 270 python3 benchmarks/fleet_scaling.py --kb-level2 .kb/level2 --copies 1 --cross-max 12 \
      --deadline-s 170 --json-out "$out/fleet_kb.json" > "$out/fleet_kb.md" 2> "$out/fleet_kb.log"
    cat "$out/fleet_kb.md"; tail -12 "$out/fleet_kb.log" ;;
  judge)  # the sandbox and the judge on the GPU: hostile and exploit suites, then a few real tasks
    timeout 240 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/evaluator/test_sandbox_hostile.py \
      tests/evaluator/test_exploits.py tests/evaluator/test_wire_compare.py 2>&1 | tee "$out/pytest_gpu.txt" | tail -30
    timeout 300 python3 benchmarks/kernelbench_suite.py --problems .kb --levels 2 1 --limit 4 --jsonl "$out/kb.jsonl" \
      --markdown "$out/kb.md" --deadline-s 200 2> "$out/kb.log"; cat "$out/kb.md"; tail -12 "$out/kb.log" ;;
  tenants)  # the second wall on the GPU: the hostile, tenant, red-team, ring and exploit suites (CUDA under the
    # sandbox's uid and allow-listed view), then a sample of level 2 registered and judged
    # (SUITES: test files instead of these; TESTS_TIMEOUT: their limit; KB_LIMIT=0 leaves the level-2 sample out)
    suites=${SUITES:-}; [ -n "$suites" ] || suites=$(ls tests/evaluator/test_sandbox_hostile.py tests/evaluator/test_sandbox_tenants.py tests/evaluator/test_sandbox_redteam.py \
      tests/evaluator/test_sandbox_redteam2.py tests/evaluator/test_ring_hostile.py tests/evaluator/test_frame_limits.py tests/evaluator/test_exploits.py 2>/dev/null)
    timeout "${TESTS_TIMEOUT:-360}" python3 -m pytest -q -p no:cacheprovider -rfs --tb=short --durations=15 $suites 2>&1 \
      | tee "$out/pytest_gpu.txt" | tail -45
    [ "${KB_LIMIT:-20}" = 0 ] || timeout 200 python3 benchmarks/kernelbench_suite.py --problems .kb --levels 2 --limit "${KB_LIMIT:-20}" \
      --jsonl "$out/kb.jsonl" --markdown "$out/kb.md" --deadline-s 170 2> "$out/kb.log"; cat "$out/kb.md"; tail -12 "$out/kb.log" ;;
  shared)  # fair verdicts on a shared GPU (arguments: shared_gpu.py options); the report lands after each phase
    shift
    timeout "${SHARED_TIMEOUT:-585}" python3 benchmarks/shared_gpu.py --problems .kb --json-out "$out/shared_gpu.json" \
      --markdown "$out/shared_gpu.md" "$@" 2> "$out/shared_gpu.log"; cat "$out/shared_gpu.md"; grep -v "^  " "$out/shared_gpu.log" | tail -15 ;;
  suite)  # tasks of KernelBench (arguments: kernelbench_suite.py options); rows land in $out/kb.jsonl as they
    # finish; a carried .kbrun/kb.jsonl (an earlier call's rows) is resumed: its tasks are not run again
    shift
    [ -f .kbrun/kb.jsonl ] && cp .kbrun/kb.jsonl "$out/kb.jsonl"
    timeout "${SUITE_TIMEOUT:-560}" python3 benchmarks/kernelbench_suite.py --problems .kb --jsonl "$out/kb.jsonl" \
      --markdown "$out/kb.md" "$@" 2> "$out/kb.log"; cat "$out/kb.md"; tail -25 "$out/kb.log" ;;
  suite-pair)  # the suite on a two-GPU machine: one process per GPU, each on its half of the cores and
    # every other task of each level (kernelbench_suite.py --shard); rows in $out/kb.0.jsonl and kb.1.jsonl,
    # resumed from carried .kbrun/kb.0.jsonl and kb.1.jsonl; then one summary of both (kb.md)
    shift
    for i in 0 1; do
      [ -f ".kbrun/kb.$i.jsonl" ] && cp ".kbrun/kb.$i.jsonl" "$out/kb.$i.jsonl"
      on_half "$i" timeout "${SUITE_TIMEOUT:-560}" \
        python3 benchmarks/kernelbench_suite.py --problems .kb --jsonl "$out/kb.$i.jsonl" --markdown "$out/kb.$i.md" \
        --shard "$i/2" "$@" > /dev/null 2> "$out/kb.$i.log" &
    done
    wait
    python3 benchmarks/kernelbench_suite.py --problems .kb --jsonl "$out/kb.0.jsonl" --report "$out/kb.1.jsonl" \
      --markdown "$out/kb.md"
    for i in 0 1; do tail -n 22 "$out/kb.$i.md"; tail -n 5 "$out/kb.$i.log"; done ;;
  stream)  # how fast outputs reach the judge (arguments: judge_stream.py options, e.g. --gb 2)
    shift
    timeout 300 python3 benchmarks/judge_stream.py "$@" 2>&1 | tee "$out/stream.txt" | tail -20 ;;
  profile)  # the GPU profile of three level-2 kernels (pass-through, cuBLAS + Triton epilogue, all-Triton)
    timeout 240 python3 benchmarks/profile_level2.py --problems .kb/level2 --json-out "$out/profile.json" \
      --markdown "$out/profile.md" 2> "$out/profile.log"; cat "$out/profile.md"; tail -8 "$out/profile.log" ;;
  compile-baseline)  # the GPU tests of the baselines (eager and torch.compile)
    timeout 200 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/evaluator/test_timing_protocol.py \
      -k "compile or baseline" 2>&1 | tee "$out/pytest_baselines.txt" | tail -15 ;;
  judge-tests)  # the judge's and the profile's tests on the GPU (the streamed comparison's memory included),
    # then the timing paths that go with them: one-process timing, baselines measured beside candidates
    timeout 240 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/evaluator/test_judge.py tests/evaluator/test_judge_compare.py \
      tests/evaluator/test_profile.py 2>&1 | tee "$out/pytest_judge.txt" | tail -15
    timeout 240 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/evaluator/test_timing_protocol.py \
      -k "one_process or torch_compile or single_slot or forges or lazy or compile_baseline" 2>&1 \
      | tee "$out/pytest_timing.txt" | tail -15
    timeout 60 python3 benchmarks/wire_read.py 2>&1 | tee "$out/wire_read.txt" ;;  # the judge's read loop, GB/s
  evaluator)  # the evaluator's GPU paths: timing protocol, worker pool, GPU lock, profiles
    timeout 330 python3 -m pytest -q -p no:cacheprovider -n 2 --dist loadfile -rfs --tb=short tests/evaluator/test_timing_protocol.py \
      tests/evaluator/test_worker_pool.py tests/evaluator/test_gpu_lock.py tests/evaluator/test_profile.py tests/evaluator/test_evaluator.py 2>&1 \
      | tee "$out/pytest_gpu.txt" | tail -40 ;;
  hostile-suite)  # the hostile and reward-hack suites, then KernelBench tasks (arguments as for suite,
    # a carried .kbrun/kb.jsonl resumed as there)
    shift
    timeout 240 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/evaluator/test_sandbox_hostile.py \
      tests/evaluator/test_exploits.py 2>&1 | tee "$out/pytest_gpu.txt" | tail -15
    [ -f .kbrun/kb.jsonl ] && cp .kbrun/kb.jsonl "$out/kb.jsonl"
    timeout "${SUITE_TIMEOUT:-300}" python3 benchmarks/kernelbench_suite.py --problems .kb --jsonl "$out/kb.jsonl" \
      --markdown "$out/kb.md" "$@" 2> "$out/kb.log"; cat "$out/kb.md"; tail -25 "$out/kb.log" ;;
  ring-suite)  # the rings' tests on the GPU, a 2 GB task through rings and then streamed (judge_stream.py),
    # then KernelBench tasks (arguments as for suite, a carried .kbrun/kb.jsonl resumed as there)
    shift
    timeout 240 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/evaluator/test_ring.py 2>&1 \
      | tee "$out/pytest_ring.txt" | tail -15
    timeout 150 python3 benchmarks/judge_stream.py --gb 2 --modes ring stream 2>&1 | tee "$out/stream.txt" \
      | grep -E "^(==|task|Judge)"
    [ -f .kbrun/kb.jsonl ] && cp .kbrun/kb.jsonl "$out/kb.jsonl"
    timeout "${SUITE_TIMEOUT:-300}" python3 benchmarks/kernelbench_suite.py --problems .kb --jsonl "$out/kb.jsonl" \
      --markdown "$out/kb.md" "$@" 2> "$out/kb.log"; cat "$out/kb.md"; tail -25 "$out/kb.log" ;;
  checks-suite)  # the rings' tests, the reward-hack and hostile suites (as ring-checks, within CHECKS_S), then
    # KernelBench tasks for the rest of the call (arguments as for suite, a carried .kbrun/kb.jsonl resumed)
    shift
    # (RING_TESTS and CHECK_TESTS narrow them, RING_S bounds the first)
    timeout "${RING_S:-150}" python3 -m pytest -v -p no:cacheprovider --timeout 120 -rfE --tb=short \
      ${RING_TESTS:-tests/evaluator/test_ring.py} 2>&1 | tee "$out/pytest_ring.txt" | grep -E "FAILED|ERROR|passed|failed|^E " | tail -20
    timeout $(( ${CHECKS_S:-330} - SECONDS )) python3 -m pytest -v -p no:cacheprovider -n 2 --dist loadfile \
      --timeout 150 -rfE --tb=short ${CHECK_TESTS:-tests/evaluator/test_exploits.py tests/evaluator/test_sandbox_hostile.py} 2>&1 \
      | tee "$out/pytest_gpu.txt" | grep -E "FAILED|ERROR|passed|failed|^E " | tail -20
    echo "hostile and reward-hack tests passed: $(grep -c PASSED "$out/pytest_gpu.txt")"
    [ -f .kbrun/kb.jsonl ] && cp .kbrun/kb.jsonl "$out/kb.jsonl"
    left=$(( ${CALL_BUDGET_S:-580} - SECONDS ))  # the rest of the call goes to the suite, its last minute to finish
    timeout "$left" python3 benchmarks/kernelbench_suite.py --problems .kb --jsonl "$out/kb.jsonl" \
      --markdown "$out/kb.md" --deadline-s $(( left - 70 )) "$@" 2> "$out/kb.log"; cat "$out/kb.md"; tail -25 "$out/kb.log" ;;
  ring-checks)  # the rings' tests, then the reward-hack and hostile suites (two xdist workers), each test
    # named as it ends (-v), so a call cut short still says which passed
    timeout 150 python3 -m pytest -v -p no:cacheprovider --timeout 120 -rfE --tb=short tests/evaluator/test_ring.py 2>&1 \
      | tee "$out/pytest_ring.txt" | grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|^E " | tail -40
    timeout $(( ${CALL_BUDGET_S:-580} - SECONDS )) python3 -m pytest -v -p no:cacheprovider -n 2 --dist loadfile \
      --timeout 150 -rfE --tb=short tests/evaluator/test_exploits.py tests/evaluator/test_sandbox_hostile.py 2>&1 \
      | tee "$out/pytest_gpu.txt" | grep -E "FAILED|ERROR|passed|failed|^E " | tail -30
    echo "passed: $(grep -c PASSED "$out/pytest_gpu.txt")" ;;
  clock-probe)  # the field's timing loop and ours on one model in one process, from idle and hot, with
    # nvidia-smi's clocks beside them; then the field's harness three times on each of two candidates
    timeout 200 python3 benchmarks/clock_probe.py --problems .kb --field-harness .kbh 2>&1 | tee "$out/probe.md"
    for _ in 1 2 3; do for c in v1_flat_b1024_inplace v5_triton_gemm_128x128; do
      timeout 60 python3 .kbh/run_harness.py .kb/level2/12_Gemm_Multiply_LeakyReLU.py \
        "benchmarks/candidates/level2/12_Gemm_Multiply_LeakyReLU/$c.py" --tol 0.01 | cut -c1-300 | tee -a "$out/probe_field.txt"
    done; done ;;
  judge-checks)  # the reward-hack, hostile and judge suites at once (a worker per file, within CALL_BUDGET_S),
    # each test named as it ends and each failure's traceback written as it happens (failures.txt)
    timeout $(( ${CALL_BUDGET_S:-580} - SECONDS )) env ADAEXPLORE_FAILURE_LOG="$out/failures.txt" \
      python3 -m pytest -v -p no:cacheprovider -n 3 --dist loadfile --timeout 150 -rfE --tb=short \
      tests/evaluator/test_exploits.py tests/evaluator/test_sandbox_hostile.py tests/evaluator/test_judge.py 2>&1 \
      | tee "$out/pytest_gpu.txt" | grep -E "FAILED|ERROR|passed|failed|^E " | tail -30
    echo "passed: $(grep -c PASSED "$out/pytest_gpu.txt")"
    if [ -f "$out/failures.txt" ]; then head -c 6000 "$out/failures.txt"; fi ;;
  agent-view)  # the GPU-mode tests of what the agent sees (hints checked on the GPU, the profile tool),
    # then those of how outputs and inputs travel (inputs made on the GPU, the staging buffer, the judge stopped)
    timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE --tb=short tests/evaluator/test_lint_hints.py \
      tests/server/test_server_profile.py tests/evaluator/test_wire_compare.py 2>&1 | grep -v "^SKIPPED" \
      | tee "$out/pytest_agent_view.txt" | tail -15
    timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE --tb=short tests/evaluator/test_timing_protocol.py \
      -k "inputs or judge_is_stopped" 2>&1 | tee -a "$out/pytest_agent_view.txt" | tail -8 ;;
  vs-field)  # our evaluator against the field's harness (arguments: vs_field.py options, e.g. --shape first);
    # the field's harness travels in .kbh/ (a copy of ../shared/kernelbench without its problems)
    shift
    timeout 585 python3 benchmarks/vs_field.py --problems .kb --field-harness .kbh/run_harness.py \
      --json-out "$out/vs_field.json" --markdown "$out/vs_field.md" "$@" 2> "$out/vs_field.log"
    cat "$out/vs_field.md"; tail -25 "$out/vs_field.log" ;;
  sealed-search)  # the sealed build's GPU tests, then vs_field.py (arguments: its options, e.g. --shape search --repeat 3)
    shift
    timeout "${TESTS_TIMEOUT:-120}" python3 -m pytest -q -p no:cacheprovider -rfs --tb=short \
      tests/evaluator/test_sealed_cache.py tests/evaluator/test_compiled_handoff.py 2>&1 | tee "$out/pytest_sealed.txt" | tail -8
    timeout "${FIELD_TIMEOUT:-450}" python3 benchmarks/vs_field.py --problems .kb --field-harness .kbh/run_harness.py \
      --json-out "$out/vs_field.json" --markdown "$out/vs_field.md" "$@" 2> "$out/vs_field.log"
    cat "$out/vs_field.md"; grep -v "^\[" "$out/vs_field.log" | tail -15 ;;
  vs-field-scan)  # ours only, once per worker count in $SCAN (e.g. SCAN="8 12 14"), other arguments as vs-field;
    # a diagnostic of how many workers at once the machine can use (no ratio: the field does not run)
    shift
    for p in ${SCAN:-8 12}; do
      timeout "${SCAN_S:-200}" python3 benchmarks/vs_field.py --problems .kb --ours-only --parallel "$p" \
        --json-out "$out/scan_$p.json" --markdown "$out/scan_$p.md" "$@" 2> "$out/scan_$p.log"
      echo "== $p workers"; grep -E "^\| ours|round 2|^\| (candidate|timing|reference)" "$out/scan_$p.md"
    done ;;
  vs-field-pair)  # both shapes at once on a two-GPU machine: search on GPU 0, first contact on GPU 1,
    # each process on its half of the cores
    shift
    for i in 0 1; do
      shape=search; [ "$i" = 1 ] && shape=first
      on_half "$i" timeout 585 python3 benchmarks/vs_field.py \
        --problems .kb --field-harness .kbh/run_harness.py --shape $shape --json-out "$out/vs_field_$shape.json" \
        --markdown "$out/vs_field_$shape.md" "$@" > /dev/null 2> "$out/vs_field_$shape.log" &
    done
    wait; cat "$out"/vs_field_*.md; tail -n 15 "$out"/vs_field_*.log ;;
  static)  # verdicts the static checks settle, timed on a loaded server (benchmarks/static_verdicts.py; TASKS,
    # COPIES), then their tests on the GPU
    shift
    timeout 400 python3 benchmarks/static_verdicts.py --problems .kb --tasks "${TASKS:-12,63,86}" \
      --copies "${COPIES:-4}" "$@" > "$out/static_verdicts.md" 2> "$out/static_verdicts.log"
    cat "$out/static_verdicts.md"; grep -v "^\[" "$out/static_verdicts.log" | tail -5
    timeout 150 python3 -m pytest -q -p no:cacheprovider -rfs tests/server/test_static_verdicts.py \
      tests/evaluator/test_lint_torch_only.py 2>&1 | tail -8 ;;
  replay)  # `adaexplore bench` end to end with each method (tree, chain, sample) on six level-2 tasks, the model
    # replayed from benchmarks/candidates/level2 (five kernels per task); the report, the step logs and the plots
    # land in $out/replay. The wheels in .whl must include the bench extra (openai, matplotlib; rich is in the
    # image). PROBLEMS, TASKS, STEPS, REPLAY_DIR, METHODS change what runs (the CPU dry run uses
    # PROBLEMS=examples/tasks REPLAY_DIR=tests/bench/replay); the run folder stays in $RUN_DIR, so a second call on
    # a warm machine resumes it; other arguments go to `adaexplore bench`
    shift
    run_dir=${RUN_DIR:-/tmp/adaexplore-bench-replay}
    timeout "${REPLAY_TIMEOUT:-420}" python3 -m adaexplore.server.face.cli bench --problems "${PROBLEMS:-.kb}" --level 2 \
      --tasks "${TASKS:-12,63,86,9,81,53}" --steps "${STEPS:-5}" --method "${METHODS:-all}" --parallel \
      --driver replay --replay-dir "${REPLAY_DIR:-benchmarks/candidates/level2}" --run-dir "$run_dir" \
      --time-limit "${TIME_LIMIT:-330}" --no-progress "$@" 2> "$out/replay.log"
    echo "bench exit status: $?" | tee -a "$out/replay.log"
    python3 -m adaexplore.server.face.cli report "$run_dir" > /dev/null  # again, in case the bench was cut off
    # the device tool brings back few files: the report and plots as they are, the rest (settings, step logs) in
    # one archive
    mkdir -p "$out/replay"
    cp "$run_dir"/report.md "$run_dir"/plots/*.png "$out/replay/"
    tar -czf "$out/replay/run.tgz" -C "$run_dir" --exclude='*/server' bench.json report.json \
      $(cd "$run_dir" && ls -d */ | grep -v plots)
    cat "$out/replay/report.md"; grep -v "^\[" "$out/replay.log" | tail -15 ;;
esac
