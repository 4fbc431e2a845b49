#!/usr/bin/env bash
# Runs the seed example, the concurrency GPU tests of the runtime and the libraries, the
# library stress test (64 tasks, all three libraries and the cuFFT user library) and the
# issuing stress tests (64 tasks x 1,000 launches through the issue engine's threads and
# through the worker pool, each launch checking its stream's sequence number) under
# compute-sanitizer: memcheck (out-of-bounds and misaligned device accesses, hardware
# exceptions, CUDA API errors) and racecheck (shared-memory hazards in kernels). Prints one
# line per run: tool, target, errors found, PASS/FAIL; exits non-zero when any run fails.
#
#   packages/examples/src/sanitize/sanitize.sh          # from the repository root
#   SANITIZE_QUICK=1 ...                                 # only the seed demo, both tools
#   SANITIZE_ONLY=stress ...                             # only the stress test, both tools
#   SANITIZE_ONLY=engine SANITIZE_TOOL=memcheck ...      # only the issuing stress tests, memcheck
#
# Environment:
#   SANITIZE_QUICK=1          only the seed demo under both tools (about a minute)
#   SANITIZE_LEAK_CHECK=1     memcheck also with --leak-check full (see below; off by default)
#   SANITIZE_LOG_DIR=dir      where the logs go (default: $OUT/sanitize when $OUT is set, else
#                             /tmp/cuda-tasks-sanitize)
#   SANITIZE_DEMO_ARGS=...    arguments of the seed demo (default "--n 256 --warmups 20": the
#                             sanitizer instruments every kernel, racecheck every shared-memory
#                             access of cuBLAS's SGEMM, so a 1024^3 product 2,000 times over
#                             would take many minutes; 256 and 20 warm-ups run the same code
#                             paths)
#   SANITIZE_DEMO_TIMEOUT=s   per-run limit for the demo (default 90)
#   SANITIZE_TESTS_TIMEOUT=s  per-run limit for the tests (default 150)
#   SANITIZE_STRESS_TIMEOUT=s per-run limit for the library stress test (default 240)
#   SANITIZE_ENGINE_TIMEOUT=s per-run limit for the issuing stress tests (default 540; racecheck
#                             instruments every launch, see docs/decisions/0042)
#   SANITIZE_ONLY=target      run one target: demo, tests, stress or engine (a full run can
#                             exceed ten minutes; split it this way)
#   SANITIZE_TOOL=tool        run one tool: memcheck or racecheck (default both)
#   COMPUTE_SANITIZER=path    the sanitizer (default /usr/local/cuda/bin/compute-sanitizer)
#
# Leak checking: `--leak-check full` reports device allocations still alive when a context is
# torn down. Our processes exit with library handles parked in their HandleCaches (cuBLAS and
# cuSOLVER keep internal device buffers per handle, cuFFT plans twiddle tables) and the
# stream-ordered pool's reserve, by design: handles are reused until exit, never destroyed one
# by one. Those would be reported as leaks that are not ours to fix, so the default run does
# not enable it; SANITIZE_LEAK_CHECK=1 adds it for a manual look at the reports.
#
# Budget: the eight runs stay under ~34 minutes (demo 2 x 90 s, tests 2 x 150 s, stress
# 2 x 240 s, engine 2 x 540 s at most); where one command may take at most ten minutes, run
# SANITIZE_ONLY=demo, =tests, =stress and =engine one after another, and the engine target one
# tool at a time (SANITIZE_TOOL).
set -uo pipefail

# The help is the comment above: printed for --help / -h, before anything is looked for.
usage() { awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }
for argument in "$@"; do
  case $argument in
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "sanitize: unknown argument '$argument' (the script takes none; it reads the variables below)" >&2
      echo >&2
      usage >&2
      exit 2
      ;;
  esac
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)
cd "$ROOT"

# The variables that choose what runs are checked before anything is looked for.
ONLY=${SANITIZE_ONLY:-}
if [[ -n $ONLY && $ONLY != demo && $ONLY != tests && $ONLY != stress && $ONLY != engine ]]; then
  echo "sanitize: SANITIZE_ONLY must be demo, tests, stress or engine, got '$ONLY'" >&2
  exit 2
fi
TOOLS=(memcheck racecheck)
if [[ -n ${SANITIZE_TOOL:-} ]]; then
  if [[ $SANITIZE_TOOL != memcheck && $SANITIZE_TOOL != racecheck ]]; then
    echo "sanitize: SANITIZE_TOOL must be memcheck or racecheck, got '$SANITIZE_TOOL'" >&2
    exit 2
  fi
  TOOLS=("$SANITIZE_TOOL")
fi

SANITIZER=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
if [[ ! -x $SANITIZER ]]; then
  SANITIZER=$(command -v compute-sanitizer || true)
fi
if [[ -z $SANITIZER || ! -x $SANITIZER ]]; then
  echo "sanitize: compute-sanitizer not found (set COMPUTE_SANITIZER or install the CUDA toolkit)" >&2
  exit 2
fi

if [[ -n ${SANITIZE_LOG_DIR:-} ]]; then
  LOG_DIR=$SANITIZE_LOG_DIR
elif [[ -n ${OUT:-} ]]; then
  LOG_DIR=$OUT/sanitize
else
  LOG_DIR=/tmp/cuda-tasks-sanitize
fi
mkdir -p "$LOG_DIR"

DEMO_TIMEOUT=${SANITIZE_DEMO_TIMEOUT:-90}
TESTS_TIMEOUT=${SANITIZE_TESTS_TIMEOUT:-150}
STRESS_TIMEOUT=${SANITIZE_STRESS_TIMEOUT:-240}
ENGINE_TIMEOUT=${SANITIZE_ENGINE_TIMEOUT:-540}
# The library stress test: 64 tasks mixing cuBLAS, cuSOLVER, cuRAND and the cuFFT user library
# past the stream and handle bounds, bit-identical to a serial run. It shrinks its problem sizes
# under the sanitizer (CUDA_TASKS_SANITIZER=1), which instruments every kernel.
STRESS_FILE=packages/examples/src/libraries-stress.gpu.test.ts
# The issuing stress tests (issue engine and worker pool): 64 tasks (jobs) x 1,000 launches of
# a kernel that checks its stream's sequence number, through 8 issuer threads and through 8
# worker threads (the pool's jobs make 100 launches each under the tool). Only those two cases
# of the files run (their names share the pattern).
ENGINE_FILES=(
  packages/task-runtime/src/issue-engine.gpu.test.ts
  packages/task-runtime/src/worker-pool.gpu.test.ts
)
ENGINE_NAME_PATTERN='each stream.s order holds'
# The `tests` target leaves those two files to this one (their other cases are GPU-suite
# tests of the engine's and the pool's behaviour, not of concurrency under the tool).
ENGINE_EXCLUDES=()
for file in "${ENGINE_FILES[@]}"; do ENGINE_EXCLUDES+=(--exclude "**/${file##*/}"); done
TSX=(node_modules/.bin/tsx --conditions=@cuda-tasks/source)
DEMO=(packages/examples/src/seed/demo.ts)
read -r -a DEMO_ARGS <<<"${SANITIZE_DEMO_ARGS---n 256 --warmups 20}"
TEST_FILES=(
  packages/task-runtime
  packages/cublas/src/handle.gpu.test.ts
  packages/curand
  packages/cusolver/src/handle.gpu.test.ts
  packages/examples/src/libraries-concurrency.gpu.test.ts
)
# Tests that assert wall-clock timing or event-loop delay: the sanitizer instruments every
# kernel and serializes work, so they measure the tool, not the code. Everything else runs.
TIMING_TESTS='overlaps two tasks with long kernels|events show two tasks with long kernels overlap|does not wait for another task|returns once the task.s stream is idle|keeps the event loop responsive|neither starve the pool nor block the event loop|records two named tasks'
TEST_NAME_PATTERN="^(?!.*(${TIMING_TESTS})).*$"

# Sanitizer options shared by every run. --target-processes all: vitest runs the tests in
# forked workers and tsx starts node in a child process; both must be followed.
COMMON=(--target-processes all --error-exitcode 1 --print-limit 20)

SUMMARY=()
FAILED=0

# count_errors FILE...: the errors the sanitizer reported, summed over every process it
# followed. Each process ends with "ERROR SUMMARY: N errors"; racecheck also prints
# "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)", used for a process whose
# ERROR SUMMARY line is missing (its errors are included in the ERROR SUMMARY otherwise).
count_errors() {
  local file total=0 count
  for file in "$@"; do
    [[ -f $file ]] || continue
    if grep -aqE 'ERROR SUMMARY: [0-9]+ error' "$file"; then
      while read -r count; do
        total=$((total + count))
      done < <(grep -aoE 'ERROR SUMMARY: [0-9]+ error' "$file" | grep -oE '[0-9]+')
    else
      while read -r count; do
        total=$((total + count))
      done < <(grep -aoE 'RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ error' "$file" |
        grep -oE '[0-9]+ error' | grep -oE '[0-9]+')
    fi
  done
  echo "$total"
}

# summaries FILE...: how many sanitizer summaries were printed (0: the sanitizer never
# reported on any process, which is itself a failure).
summaries() {
  local file total=0 count
  for file in "$@"; do
    [[ -f $file ]] || continue
    count=$(grep -acE '(ERROR|RACECHECK) SUMMARY: ' "$file" || true)
    total=$((total + count))
  done
  echo "$total"
}

# tests_passed FILE: how many tests vitest reports as passed in its "Tests  N passed" line
# (0 when the line is missing: vitest found no test, or every test was skipped or filtered
# out, e.g. on a machine where the GPU probe failed).
tests_passed() {
  local file=$1 line
  [[ -f $file ]] || {
    echo 0
    return
  }
  line=$(sed 's/\x1b\[[0-9;]*m//g' "$file" | grep -aE '^[[:space:]]*Tests[[:space:]]+' | tail -n 1)
  if [[ $line =~ ([0-9]+)[[:space:]]+passed ]]; then
    echo "${BASH_REMATCH[1]}"
  else
    echo 0
  fi
}

# run TOOL TARGET TIMEOUT COMMAND...: one sanitized run, logged to $LOG_DIR. A `tests` run
# also fails when vitest ran no test (a sanitized run of nothing proves nothing).
run() {
  local tool=$1 target=$2 limit=$3
  shift 3
  local options=(--tool "$tool" "${COMMON[@]}")
  if [[ $tool == memcheck && ${SANITIZE_LEAK_CHECK:-0} == 1 ]]; then
    options+=(--leak-check full)
  fi
  local base="$LOG_DIR/$tool-$target"
  rm -f "$base".sanitizer.*.log "$base".out.log
  # The sanitizer's own report goes to per-process files (%p), the program's output (and
  # anything the sanitizer prints outside them) to .out.log.
  local started=$SECONDS
  timeout --kill-after=10 "$limit" "$SANITIZER" "${options[@]}" \
    --log-file "$base.sanitizer.%p.log" "$@" >"$base.out.log" 2>&1
  local status=$?
  local elapsed=$((SECONDS - started))
  local logs=("$base".sanitizer.*.log "$base.out.log")
  local errors processes verdict note=""
  errors=$(count_errors "${logs[@]}")
  processes=$(summaries "${logs[@]}")
  if [[ $status -eq 124 || $status -eq 137 ]]; then
    verdict=FAIL
    note=" (timed out after ${limit}s)"
  elif [[ $errors -gt 0 ]]; then
    verdict=FAIL
  elif [[ $status -ne 0 ]]; then
    verdict=FAIL
    note=" (exit status $status; see $base.out.log)"
  elif [[ $processes -eq 0 ]]; then
    verdict=FAIL
    note=" (no sanitizer summary: did the target use the GPU?)"
  elif [[ $target != demo && $(tests_passed "$base.out.log") -eq 0 ]]; then
    verdict=FAIL
    note=" (vitest ran no test: all skipped or none found; see $base.out.log)"
  else
    verdict=PASS
  fi
  [[ $verdict == FAIL ]] && FAILED=1
  local line
  line=$(printf '%-9s %-6s errors: %-3s %s  %3ss%s' "$tool" "$target" "$errors" "$verdict" "$elapsed" "$note")
  SUMMARY+=("$line")
  echo "$line"
  if [[ $verdict == FAIL ]]; then
    # The first reports, so that the failure is visible without opening the logs.
    cat "${logs[@]}" 2>/dev/null | grep -a -m 20 -E '^========= (Invalid|Program hit|Error|Race|Warning|.*hazard)' || true
    # And the tests that failed (a timing assertion the tool's slowdown broke, ...).
    if [[ $target != demo ]]; then
      sed 's/\x1b\[[0-9;]*m//g' "$base.out.log" 2>/dev/null | grep -a -m 20 -E '(FAIL|×|✗) ' || true
    fi
  fi
}

echo "compute-sanitizer: $("$SANITIZER" --version 2>/dev/null | tail -n 1)"
echo "logs: $LOG_DIR"

# wants TARGET: whether this run includes TARGET (SANITIZE_ONLY, SANITIZE_QUICK).
wants() {
  if [[ -n $ONLY ]]; then
    [[ $ONLY == "$1" ]]
  elif [[ ${SANITIZE_QUICK:-0} == 1 ]]; then
    [[ $1 == demo ]]
  else
    true
  fi
}

export CUDA_TASKS_SANITIZER=1
for tool in "${TOOLS[@]}"; do
  if wants demo; then
    run "$tool" demo "$DEMO_TIMEOUT" "${TSX[@]}" "${DEMO[@]}" "${DEMO_ARGS[@]}"
  fi
  if wants tests; then
    run "$tool" tests "$TESTS_TIMEOUT" node_modules/.bin/vitest run --project gpu \
      -t "$TEST_NAME_PATTERN" "${ENGINE_EXCLUDES[@]}" "${TEST_FILES[@]}"
  fi
  if wants stress; then
    run "$tool" stress "$STRESS_TIMEOUT" node_modules/.bin/vitest run --project gpu "$STRESS_FILE"
  fi
  if wants engine; then
    run "$tool" engine "$ENGINE_TIMEOUT" node_modules/.bin/vitest run --project gpu \
      -t "$ENGINE_NAME_PATTERN" "${ENGINE_FILES[@]}"
  fi
done

echo
echo "summary:"
printf '  %s\n' "${SUMMARY[@]}"
if [[ $FAILED -ne 0 ]]; then
  echo "sanitize: FAIL (logs in $LOG_DIR)"
  exit 1
fi
echo "sanitize: PASS"
