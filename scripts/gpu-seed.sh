#!/usr/bin/env bash
# The seed example's GPU test, the traced demo and the benchmark suite on the GPU machine
# (after `. .device/setup`). Files under $OUT; summaries last.
set -uo pipefail
out=${OUT:-/tmp/gpu-seed}
mkdir -p "$out"
tsx=(node_modules/.bin/tsx --conditions=@cuda-tasks/source)
timeout 120 node_modules/.bin/vitest run --project gpu packages/examples/src/seed > "$out/gpu.log" 2>&1
timeout 60 "${tsx[@]}" packages/examples/src/seed/demo.ts --trace --out /tmp/demo > "$out/demo.log" 2>&1
cp /tmp/demo/seed-trace.json /tmp/demo/seed-timeline.svg "$out/" 2>/dev/null
timeout 300 "${tsx[@]}" packages/examples/bench/run.ts --out /tmp/bench > "$out/bench.log" 2>&1
cp /tmp/bench/bench.json /tmp/bench/bench.svg "$out/" 2>/dev/null
echo "== GPU tests"; grep -E "✗|×|FAIL|Test Files|Tests  " "$out/gpu.log" | head
echo "== demo"; cat "$out/demo.log"
echo "== benchmarks"; tail -n 22 "$out/bench.log"
