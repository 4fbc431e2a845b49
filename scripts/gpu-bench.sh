#!/usr/bin/env bash
# GPU tests, the hot-path experiments and the whole benchmark suite (C, ours, CuPy, PyTorch) on
# the GPU machine (after `. .device/setup`). Files under $OUT; summaries last.
set -uo pipefail
out=${OUT:-/tmp/gpu-bench}
mkdir -p "$out"
tsx=(node_modules/.bin/tsx --conditions=@cuda-tasks/source)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 240 node_modules/.bin/vitest run --project gpu "$@" > "$out/gpu.log" 2>&1
fi
timeout 120 "${tsx[@]}" packages/examples/bench/ts/experiments.ts > "$out/exp.log" 2>&1
timeout 300 "${tsx[@]}" packages/examples/bench/run.ts --out /tmp/bench > "$out/bench.log" 2>&1
cp /tmp/bench/bench.json /tmp/bench/bench.svg "$out/" 2>/dev/null
echo "== GPU tests"; grep -E "✗|×|FAIL|Test Files|Tests  " "$out/gpu.log" 2>/dev/null | head -30
echo "== experiments"; cut -c1-160 "$out/exp.log"
echo "== benchmarks"; tail -n 40 "$out/bench.log"
