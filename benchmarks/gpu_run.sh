#!/usr/bin/env bash
# What runs on the GPU machine (see benchmarks/RESULTS.md). Usage: bash benchmarks/gpu_run.sh tests|all|bench
# The image has torch and Triton but not this project's other dependencies: they come as wheels
# in .whl/ (made by the device-wheels tool), installed into /tmp/site.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$out/device.txt"
case "${1:-tests}" in
  tests)
    timeout 470 python3 -m pytest -q -p no:cacheprovider -rs tests 2>&1 | tee "$out/pytest_gpu.txt" | tail -25
    timeout 90 python3 benchmarks/evaluate_examples.py > "$out/examples_gpu.md" 2> "$out/examples_gpu.log"
    cat "$out/examples_gpu.md" ;;
  all)
    timeout 330 python3 -m pytest -q -p no:cacheprovider -rs tests 2>&1 | tee "$out/pytest_gpu.txt" | tail -30
    timeout 235 python3 benchmarks/eval_throughput.py --quick --json-out "$out/throughput.json" \
      > "$out/throughput.md" 2> "$out/throughput.log"; cat "$out/throughput.md" ;;
  bench)
    timeout 280 python3 benchmarks/eval_throughput.py --quick --json-out "$out/throughput.json" \
      > "$out/throughput.md" 2> "$out/throughput.log"; cat "$out/throughput.md"
    timeout 100 python3 benchmarks/eval_throughput.py --skip-cold --shared-gpu > "$out/throughput_shared.md" \
      2> "$out/throughput_shared.log"; cat "$out/throughput_shared.md"
    timeout 190 python3 benchmarks/timing_fidelity.py --quick --json-out "$out/fidelity.json" \
      > "$out/fidelity.md" 2> "$out/fidelity.log"; cat "$out/fidelity.md" ;;
esac
