#!/usr/bin/env bash
# The whole GPU pass on the GPU machine (after `. .device/setup`): every GPU test, the seed demo
# with its trace, the HTTP load comparison, the launch breakdown, the seed workload step by step
# (TypeScript and C), isolated-call costs, the benchmark suite against C, CuPy and PyTorch (C and
# ours in alternating rounds), and the seed demo under compute-sanitizer. Files under $OUT;
# summaries last.
set -uo pipefail
out=${OUT:-/tmp/gpu-full}
mkdir -p "$out"
tsx=(node_modules/.bin/tsx --conditions=@cuda-tasks/source)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
timeout 240 node_modules/.bin/vitest run --project gpu "$@" > "$out/gpu.log" 2>&1
{
  timeout 60 "${tsx[@]}" packages/examples/src/seed/demo.ts --trace --out /tmp/demo
  cp /tmp/demo/seed-trace.json /tmp/demo/seed-timeline.svg "$out/" 2>/dev/null
  timeout 90 "${tsx[@]}" packages/examples/src/service/load.ts --requests 600 --seconds 12 --concurrency 32 --n 256
} > "$out/examples.log" 2>&1
timeout 90 "${tsx[@]}" packages/examples/bench/ts/breakdown.ts >> "$out/examples.log" 2>&1
timeout 90 "${tsx[@]}" packages/examples/bench/ts/experiments-seed.ts >> "$out/examples.log" 2>&1
ROUNDS=2000 timeout 60 "${tsx[@]}" packages/examples/bench/ts/experiments-gemm.ts > "$out/isolated.log" 2>&1
nvcc -O2 -arch=sm_90 -o /tmp/seed-probe packages/examples/bench/c/seed-probe.cu -lcublas -lcuda \
  > "$out/probe.log" 2>&1 && timeout 60 /tmp/seed-probe packages/examples/src/kernels/kernels.ptx >> "$out/probe.log" 2>&1
timeout 300 "${tsx[@]}" packages/examples/bench/run.ts --out /tmp/bench > "$out/bench.log" 2>&1
cp -r /tmp/bench/bench.json /tmp/bench/bench.svg /tmp/bench/raw "$out/" 2>/dev/null
SANITIZE_DEMO_TIMEOUT=60 SANITIZE_TESTS_TIMEOUT=100 SANITIZE_LOG_DIR=/tmp/sanitize timeout 330 packages/examples/src/sanitize/sanitize.sh > "$out/sanitize.log" 2>&1
echo "== GPU tests"; grep -E "✗|×|FAIL|Test Files|Tests  " "$out/gpu.log" | head -30
echo "== demo, load, launch breakdown, seed steps"; grep -v "^ *$" "$out/examples.log" | grep -v '"name":"[A-G] ' | cut -c1-120 | tail -n 30
echo "== seed step by step: C, then ours"; cut -c1-110 "$out/probe.log"; grep -E '"name":"H' "$out/examples.log" | cut -c1-110
echo "== isolated calls"; cut -c1-110 "$out/isolated.log"
echo "== sanitizer"; tail -n 8 "$out/sanitize.log"
echo "== benchmarks"; tail -n 60 "$out/bench.log"
