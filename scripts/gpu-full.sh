#!/usr/bin/env bash
# The GPU pass on the GPU machine (after `. .device/setup`): every GPU test, the seed demo
# with its trace, the HTTP load comparison, the launch breakdown, the seed workload step by step
# (TypeScript and C), isolated-call costs, the benchmark suite against C, CuPy and PyTorch (C and
# ours in alternating rounds), and the seed demo under compute-sanitizer. Files under $OUT;
# summaries last. Arguments go to vitest (test filters).
#   SKIP_TESTS=1, SKIP_EXAMPLES=1, SKIP_PROBES=1, SKIP_BENCH=1, SKIP_SANITIZE=1 leave a part out.
set -uo pipefail
out=${OUT:-/tmp/gpu-full}
mkdir -p "$out"
tsx=(node_modules/.bin/tsx --conditions=@cuda-tasks/source)
run() { [ "${!1:-0}" != 1 ]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if run SKIP_TESTS; then
  timeout 300 node_modules/.bin/vitest run --project gpu "$@" > "$out/gpu.log" 2>&1
fi
if run SKIP_EXAMPLES; then
  {
    timeout 60 "${tsx[@]}" packages/examples/src/seed/demo.ts --trace --out /tmp/demo
    cp /tmp/demo/seed-trace.json /tmp/demo/seed-timeline.svg "$out/" 2>/dev/null
    timeout 90 "${tsx[@]}" packages/examples/src/service/load.ts --requests 600 --seconds 12 --concurrency 32 --n 256
    timeout 90 "${tsx[@]}" packages/examples/src/service/load.ts --route solve-random --requests 600 --seconds 12 --concurrency 32 --n 1024
  } > "$out/examples.log" 2>&1
fi
if run SKIP_PROBES; then
  timeout 90 "${tsx[@]}" packages/examples/bench/ts/breakdown.ts > "$out/probes.log" 2>&1
  timeout 90 "${tsx[@]}" packages/examples/bench/ts/experiments-seed.ts >> "$out/probes.log" 2>&1
  ROUNDS=2000 timeout 60 "${tsx[@]}" packages/examples/bench/ts/experiments-gemm.ts > "$out/isolated.log" 2>&1
  nvcc -O2 -arch=sm_90 -o /tmp/seed-probe packages/examples/bench/c/seed-probe.cu -lcublas -lcuda \
    > "$out/probe.log" 2>&1 && timeout 60 /tmp/seed-probe packages/examples/src/kernels/kernels.ptx >> "$out/probe.log" 2>&1
fi
if run SKIP_BENCH; then
  timeout 300 "${tsx[@]}" packages/examples/bench/run.ts --out /tmp/bench > "$out/bench.log" 2>&1
  cp -r /tmp/bench/bench.json /tmp/bench/bench.svg /tmp/bench/raw "$out/" 2>/dev/null
fi
if run SKIP_SANITIZE; then
  SANITIZE_DEMO_TIMEOUT=60 SANITIZE_TESTS_TIMEOUT=100 SANITIZE_LOG_DIR=/tmp/sanitize timeout 330 packages/examples/src/sanitize/sanitize.sh > "$out/sanitize.log" 2>&1
fi
show() { [ -f "$out/$1" ] && { echo "== $2"; shift 2; "$@"; }; }
show gpu.log "GPU tests" grep -E "✗|×|FAIL|Test Files|Tests  " "$out/gpu.log"
show examples.log "demo and load" sh -c "grep -v '^ *$' '$out/examples.log' | cut -c1-120 | tail -n 24"
show probes.log "launch breakdown, seed steps (ours)" sh -c "grep -v '\"name\":\"[A-G] ' '$out/probes.log' | cut -c1-110"
show probe.log "seed steps and isolated calls (C)" cut -c1-110 "$out/probe.log"
show isolated.log "isolated calls (ours)" cut -c1-110 "$out/isolated.log"
show sanitize.log "sanitizer" tail -n 8 "$out/sanitize.log"
show bench.log "benchmarks" tail -n 60 "$out/bench.log"
exit 0
