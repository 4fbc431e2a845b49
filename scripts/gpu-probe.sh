#!/usr/bin/env bash
# GPU tests, the seed workload step by step in TypeScript (experiments-seed.ts) and in C
# (bench/c/seed-probe.cu), then the benchmark suite, on the GPU machine (after
# `. .device/setup`). Files under $OUT; summaries last.
set -uo pipefail
out=${OUT:-/tmp/gpu-probe}
mkdir -p "$out"
tsx=(node_modules/.bin/tsx --conditions=@cuda-tasks/source)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 240 node_modules/.bin/vitest run --project gpu "$@" > "$out/gpu.log" 2>&1
fi
nvcc -O2 -arch=sm_90 -o /tmp/seed-probe packages/examples/bench/c/seed-probe.cu -lcublas -lcuda \
  > "$out/probe.log" 2>&1 && timeout 60 /tmp/seed-probe packages/examples/src/kernels/kernels.ptx >> "$out/probe.log" 2>&1
timeout 120 "${tsx[@]}" packages/examples/bench/ts/experiments-seed.ts > "$out/seed.log" 2>&1
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  timeout 300 "${tsx[@]}" packages/examples/bench/run.ts --out /tmp/bench > "$out/bench.log" 2>&1
  cp /tmp/bench/bench.json /tmp/bench/bench.svg "$out/" 2>/dev/null
fi
echo "== GPU tests"; grep -E "✗|×|FAIL|Test Files|Tests  " "$out/gpu.log" 2>/dev/null | head -30
echo "== C seed probe"; cut -c1-120 "$out/probe.log"
echo "== TS seed steps"; grep -E '"name":"(C|D|H)' "$out/seed.log" | cut -c1-120
echo "== benchmarks"; tail -n 40 "$out/bench.log" 2>/dev/null
