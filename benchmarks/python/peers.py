#!/usr/bin/env python3
"""Python peers (CuPy, PyTorch) for the cuda-tasks benchmark suite.

Does the same work as c/bench.cu where the library can express it and
prints the same JSON lines, with an extra "peer" field:

    {"name": "<id>", "median_us": <number>, "unit": "us/op", "note": "...", "peer": "cupy"}

Usage: python3 peers.py path/to/kernels.cu [cupy] [torch] [--only id,id,...]
(no peer names: both, in this process, CuPy first).

Each benchmark is warmed up, then run REPEATS times; the value is the median,
in microseconds per operation. Host timing with time.perf_counter(), device
durations with CUDA events. A peer that cannot be imported prints
{"name": "_skip", "peer": ..., "reason": ...}; so does a single benchmark that
fails (with an extra "id" field), and the run goes on.
"""

import json
import statistics
import sys
import time

REPEATS = 15
WARMUPS = 3
LAUNCHES = 10_000  # per batch, issue-rate benchmarks
ROUND_TRIPS = 2_000  # per batch, launch + synchronize
SGEMM_1024_CALLS = 20  # per batch, device-timed
N = 1024  # seed workload: N x N matrices
SIN_SIZES = (("1m", 1 << 20, 200), ("64m", 64 << 20, 10))  # id suffix, floats, calls per batch
SUM_N = 64 << 20  # sum_64m: floats
SUM_CALLS = 20  # per batch, device-timed
BLOCK = 256  # sin_inplace block size (same as the C baseline)
TOPK_ROWS = 1_000_000  # topk_1m_x*: rows of the score matrix (the search service's index)
TOPK_SHAPES = ((8, 40), (64, 10))  # topk_1m_x*: columns (queries), calls per batch
TOPK_K = 10


def emit(peer, name, median_us, note, extra=None):
    line = {"name": name, "median_us": round(median_us, 4), "unit": "us/op", "note": note}
    if extra:
        line["extra"] = extra
    line["peer"] = peer
    print(json.dumps(line), flush=True)


def skip(peer, reason, bench_id=None):
    line = {"name": "_skip", "peer": peer, "reason": reason}
    if bench_id is not None:
        line["id"] = bench_id
    print(json.dumps(line), flush=True)


def repeat_median(run):
    """Runs `run` WARMUPS times untimed, then REPEATS times; `run` performs one
    batch and returns its measurement in microseconds per op. Returns the median."""
    for _ in range(WARMUPS):
        run()
    return statistics.median(run() for _ in range(REPEATS))


# The benchmark ids to run (--only id,id,...), or None for all of them.
ONLY = None


def run_all(peer, benches):
    """benches: list of (id, run, note[, {"bytes": n}]). A failing benchmark becomes a _skip
    line. With bytes, the line carries the bandwidth reached (extra.bandwidth_gbs)."""
    for bench_id, run, note, *options in benches:
        if ONLY is not None and bench_id not in ONLY:
            continue
        try:
            median_us = repeat_median(run)
            extra = None
            if options and "bytes" in options[0]:
                extra = {"bandwidth_gbs": round(options[0]["bytes"] / (median_us * 1e3), 1)}
            emit(peer, bench_id, median_us, note, extra)
        except Exception as e:  # noqa: BLE001 - report and go on with the next one
            skip(peer, f"{type(e).__name__}: {e}", bench_id)


# ---------------------------------------------------------------------------
# CuPy


def cupy_benches(kernels_cu):
    import cupy as cp

    with open(kernels_cu) as f:
        module = cp.RawModule(code=f.read())  # NVRTC, same source as the PTX
    empty = module.get_function("empty_kernel")
    sin_inplace = module.get_function("sin_inplace")
    s = cp.cuda.Stream(non_blocking=True)
    s2 = cp.cuda.Stream(non_blocking=True)
    no_args = ()

    def rand(n):
        return cp.random.rand(n, n, dtype=cp.float32) * 2 - 1  # uniform [-1, 1)

    def launch_empty():
        with s:
            t0 = time.perf_counter()
            for _ in range(LAUNCHES):
                empty((1,), (1,), no_args)
            t = time.perf_counter() - t0
        s.synchronize()
        return t * 1e6 / LAUNCHES

    def launch_switch():
        t0 = time.perf_counter()
        for _ in range(LAUNCHES // 2):
            with s:
                empty((1,), (1,), no_args)
            with s2:
                empty((1,), (1,), no_args)
        t = time.perf_counter() - t0
        s.synchronize()
        s2.synchronize()
        return t * 1e6 / LAUNCHES

    def launch_sync():
        with s:
            t0 = time.perf_counter()
            for _ in range(ROUND_TRIPS):
                empty((1,), (1,), no_args)
                s.synchronize()
            return (time.perf_counter() - t0) * 1e6 / ROUND_TRIPS

    def alloc_free():
        with s:
            t0 = time.perf_counter()
            for _ in range(LAUNCHES):
                x = cp.empty(64, dtype=cp.float32)  # 256 bytes, as in the C baseline
                del x
            t = time.perf_counter() - t0
        s.synchronize()
        return t * 1e6 / LAUNCHES

    ev = cp.cuda.Event(disable_timing=True)

    def event_record():
        t0 = time.perf_counter()
        for _ in range(LAUNCHES):
            ev.record(s)
        t = time.perf_counter() - t0
        s.synchronize()
        return t * 1e6 / LAUNCHES

    with s:
        a8, b8, c8 = rand(8), rand(8), rand(8)
        a1, b1, c1 = rand(N), rand(N), rand(N)
        a2, b2, c2 = rand(N), rand(N), rand(N)
    s.synchronize()

    def sgemm_8():
        with s:
            t0 = time.perf_counter()
            for _ in range(LAUNCHES):
                cp.matmul(a8, b8, out=c8)
            t = time.perf_counter() - t0
        s.synchronize()
        return t * 1e6 / LAUNCHES

    start, stop = cp.cuda.Event(), cp.cuda.Event()

    def sgemm_1024():
        with s:
            start.record(s)
            for _ in range(SGEMM_1024_CALLS):
                cp.matmul(a1, b1, out=c1)
            stop.record(s)
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop) * 1e3 / SGEMM_1024_CALLS

    nn = cp.uint64(N * N)
    grid = ((N * N + BLOCK - 1) // BLOCK,)

    def job(a, b, c):  # on the current stream
        cp.matmul(a, b, out=c)
        sin_inplace(grid, (BLOCK,), (c, nn))

    def seed_serial():
        t0 = time.perf_counter()
        with s:
            job(a1, b1, c1)
            job(a2, b2, c2)
        s.synchronize()
        return (time.perf_counter() - t0) * 1e6

    def seed_concurrent():
        t0 = time.perf_counter()
        with s:
            job(a1, b1, c1)
        with s2:
            job(a2, b2, c2)
        s.synchronize()
        s2.synchronize()
        return (time.perf_counter() - t0) * 1e6

    def device_timed(body, calls):
        """Device microseconds per call of body() on stream s, from events around calls calls."""
        def run():
            with s:
                start.record(s)
                for _ in range(calls):
                    body()
                stop.record(s)
            stop.synchronize()
            return cp.cuda.get_elapsed_time(start, stop) * 1e3 / calls
        return run

    sin_benches = []
    for label, n, calls in SIN_SIZES:
        with s:
            x = cp.sin(cp.arange(n, dtype=cp.float32) * 0.001)  # in [-1, 1], as ours
        s.synchronize()
        sin_benches.append((f"sin_{label}", device_timed(lambda x=x: cp.sin(x, out=x), calls),
                            f"cupy.sin(x, out=x), {n} float32, device time per call from events, "
                            f"{calls} per batch"))
    with s:
        xs = (cp.arange(SUM_N, dtype=cp.float32) % 1000) / 1000 - 0.5
    s.synchronize()
    try:
        from cupy._core import _accelerator
        accelerators = ",".join(str(a) for a in _accelerator.get_routine_accelerators()) or "none"
    except Exception:  # noqa: BLE001 - only for the note
        accelerators = "unknown"

    pool = type(cp.get_default_memory_pool()).__name__
    pool_kind = "cudaMallocAsync" if "Async" in pool else "caching, not cudaMallocAsync"
    tf32 = "CUPY_TF32 unset, FP32 math"
    return cp, [
        ("launch_empty", launch_empty,
         "RawKernel empty_kernel <<<1,1>>> under `with stream`, 10000 per batch, sync excluded"),
        ("launch_switch", launch_switch,
         "empty_kernel alternating `with s:` / `with s2:`, 10000 per batch, sync excluded"),
        ("launch_sync", launch_sync,
         "empty_kernel + stream.synchronize() round trip, 2000 per batch"),
        ("alloc_free", alloc_free,
         f"cupy.empty(64, float32) (256 B) + del, default pool ({pool}: {pool_kind}), "
         "10000 per batch, sync excluded"),
        ("event_record", event_record,
         "Event(disable_timing=True).record(stream), 10000 per batch, sync excluded"),
        ("sgemm_8", sgemm_8,
         f"cupy.matmul 8x8 float32 out=, 10000 per batch, issue rate, sync excluded; {tf32}"),
        ("sgemm_1024", sgemm_1024,
         f"cupy.matmul 1024^3 float32 out=, device time per call from events, 20 per batch; "
         f"{tf32}"),
        ("seed_serial", seed_serial,
         "2 jobs (matmul 1024^3 + RawKernel sin_inplace) on one stream, host wall time per "
         "iteration"),
        ("seed_concurrent", seed_concurrent,
         "2 jobs on 2 streams (CuPy keeps one cuBLAS handle per device and sets its stream per "
         "call), "
         "host wall time per iteration"),
        *sin_benches,
        ("sum_64m", device_timed(lambda: cp.sum(xs), SUM_CALLS),
         f"cupy.sum of {SUM_N} float32, device time per call from events, {SUM_CALLS} per "
         f"batch; routine accelerators: {accelerators}", {"bytes": SUM_N * 4}),
    ]


def cupy_meta(cp):
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"]
    return {
        "version": cp.__version__,
        "device": name.decode() if isinstance(name, bytes) else name,
        "driver": cp.cuda.runtime.driverGetVersion(),
    }


# ---------------------------------------------------------------------------
# PyTorch


def set_fp32_matmul(torch):
    """Plain FP32 cuBLAS math (no TF32), whichever API this torch has. Returns a note."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # torch >= 2.9; allow_tf32 is deprecated there
        matmul.fp32_precision = "ieee"
        return "fp32_precision=ieee (no TF32)"
    matmul.allow_tf32 = False
    return "allow_tf32=False"


def torch_benches():
    """torch cannot load kernels.cu: launches use torch.cuda._sleep, sin uses c.sin_()."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False")
    tf32 = set_fp32_matmul(torch)
    dev = torch.device("cuda")
    s = torch.cuda.Stream()
    s2 = torch.cuda.Stream()
    sleep = getattr(torch.cuda, "_sleep", None)

    def rand(n):
        return torch.rand(n, n, device=dev) * 2 - 1  # float32, uniform [-1, 1)

    def launch_empty():
        with torch.cuda.stream(s):
            t0 = time.perf_counter()
            for _ in range(LAUNCHES):
                sleep(0)
            t = time.perf_counter() - t0
        s.synchronize()
        return t * 1e6 / LAUNCHES

    def launch_switch():
        t0 = time.perf_counter()
        for _ in range(LAUNCHES // 2):
            with torch.cuda.stream(s):
                sleep(0)
            with torch.cuda.stream(s2):
                sleep(0)
        t = time.perf_counter() - t0
        s.synchronize()
        s2.synchronize()
        return t * 1e6 / LAUNCHES

    def launch_sync():
        with torch.cuda.stream(s):
            t0 = time.perf_counter()
            for _ in range(ROUND_TRIPS):
                sleep(0)
                s.synchronize()
            return (time.perf_counter() - t0) * 1e6 / ROUND_TRIPS

    def alloc_free():
        with torch.cuda.stream(s):
            t0 = time.perf_counter()
            for _ in range(LAUNCHES):
                x = torch.empty(64, device=dev)  # 256 bytes of float32
                del x
            t = time.perf_counter() - t0
        s.synchronize()
        return t * 1e6 / LAUNCHES

    ev = torch.cuda.Event(enable_timing=False)

    def event_record():
        t0 = time.perf_counter()
        for _ in range(LAUNCHES):
            ev.record(s)
        t = time.perf_counter() - t0
        s.synchronize()
        return t * 1e6 / LAUNCHES

    with torch.cuda.stream(s):
        a8, b8, c8 = rand(8), rand(8), rand(8)
        a1, b1, c1 = rand(N), rand(N), rand(N)
        a2, b2, c2 = rand(N), rand(N), rand(N)
    s.synchronize()

    def sgemm_8():
        with torch.cuda.stream(s):
            t0 = time.perf_counter()
            for _ in range(LAUNCHES):
                torch.mm(a8, b8, out=c8)
            t = time.perf_counter() - t0
        s.synchronize()
        return t * 1e6 / LAUNCHES

    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)

    def sgemm_1024():
        with torch.cuda.stream(s):
            start.record(s)
            for _ in range(SGEMM_1024_CALLS):
                torch.mm(a1, b1, out=c1)
            stop.record(s)
        stop.synchronize()
        return start.elapsed_time(stop) * 1e3 / SGEMM_1024_CALLS

    def job(a, b, c):  # on the current stream
        torch.mm(a, b, out=c)
        c.sin_()

    def seed_serial():
        t0 = time.perf_counter()
        with torch.cuda.stream(s):
            job(a1, b1, c1)
            job(a2, b2, c2)
        s.synchronize()
        return (time.perf_counter() - t0) * 1e6

    def seed_concurrent():
        t0 = time.perf_counter()
        with torch.cuda.stream(s):
            job(a1, b1, c1)
        with torch.cuda.stream(s2):
            job(a2, b2, c2)
        s.synchronize()
        s2.synchronize()
        return (time.perf_counter() - t0) * 1e6

    xs = (torch.arange(SUM_N, device=dev, dtype=torch.float32) % 1000) / 1000 - 0.5
    torch.cuda.synchronize()

    def topk_bench(columns, calls):
        # The values src/kernels.ts's topkScores builds: murmur3's 32-bit finalizer of i over
        # 2^32, rounded to float32 (int64 products wrap, and the mask keeps their low 32 bits);
        # row j of this (columns, rows) tensor is ours' column j.
        h = torch.arange(TOPK_ROWS * columns, device=dev, dtype=torch.int64)
        h = h ^ (h >> 16)
        h = (h * 0x85EBCA6B) & 0xFFFFFFFF
        h = h ^ (h >> 13)
        h = (h * 0xC2B2AE35) & 0xFFFFFFFF
        h = h ^ (h >> 16)
        x = (h.double() / (1 << 32)).float().reshape(columns, TOPK_ROWS)
        values = torch.empty((columns, TOPK_K), device=dev, dtype=torch.float32)
        indices = torch.empty((columns, TOPK_K), device=dev, dtype=torch.int64)
        del h
        torch.cuda.synchronize()

        def run():
            with torch.cuda.stream(s):
                start.record(s)
                for _ in range(calls):
                    torch.topk(x, TOPK_K, dim=1, out=(values, indices))
                stop.record(s)
            stop.synchronize()
            return start.elapsed_time(stop) * 1e3 / calls
        return run

    topk_benches = [
        (f"topk_1m_x{columns}", topk_bench(columns, calls),
         f"torch.topk(x, {TOPK_K}, dim=1, out=) of a ({columns}, {TOPK_ROWS}) float32 tensor "
         f"(each row contiguous, as ours' columns), device time per call from events, {calls} "
         "per batch", {"bytes": TOPK_ROWS * columns * 4})
        for columns, calls in TOPK_SHAPES
    ]

    def sum_64m():
        with torch.cuda.stream(s):
            start.record(s)
            for _ in range(SUM_CALLS):
                torch.sum(xs)
            stop.record(s)
        stop.synchronize()
        return start.elapsed_time(stop) * 1e3 / SUM_CALLS

    benches = []
    if sleep is not None:
        benches += [
            ("launch_empty", launch_empty,
             "torch.cuda._sleep(0) (torch's smallest kernel, <<<1,1>>>) under "
             "torch.cuda.stream, 10000 per batch, sync excluded"),
            ("launch_switch", launch_switch,
             "_sleep(0) alternating `with torch.cuda.stream(s)` / `(s2)`, 10000 per batch, "
             "sync excluded"),
            ("launch_sync", launch_sync,
             "_sleep(0) + stream.synchronize() round trip, 2000 per batch"),
        ]
    benches += [
        ("alloc_free", alloc_free,
         "torch.empty(64, device=cuda) (256 B) + del, caching allocator (not "
         "cudaMallocAsync unless PYTORCH_CUDA_ALLOC_CONF says so), 10000 per batch, sync "
         "excluded"),
        ("event_record", event_record,
         "torch.cuda.Event(enable_timing=False).record(stream), 10000 per batch, sync excluded"),
        ("sgemm_8", sgemm_8,
         f"torch.mm 8x8 float32 out=, 10000 per batch, issue rate, sync excluded; {tf32}"),
        ("sgemm_1024", sgemm_1024,
         f"torch.mm 1024^3 float32 out=, device time per call from events, 20 per batch; "
         f"{tf32}"),
        ("seed_serial", seed_serial,
         "2 jobs (torch.mm 1024^3 + c.sin_()) on one stream, host wall time per iteration"),
        ("seed_concurrent", seed_concurrent,
         "2 jobs on 2 torch.cuda.Stream()s, host wall time per iteration"),
        ("sum_64m", sum_64m,
         f"torch.sum of {SUM_N} float32, device time per call from events, {SUM_CALLS} per "
         "batch", {"bytes": SUM_N * 4}),
        *topk_benches,
    ]
    return torch, benches, sleep is None


def torch_meta(torch):
    return {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(),
        "allocator": getattr(torch.cuda, "get_allocator_backend", lambda: "unknown")(),
    }


# ---------------------------------------------------------------------------


def run_cupy(kernels_cu):
    try:
        import cupy  # noqa: F401
    except Exception as e:  # noqa: BLE001
        skip("cupy", f"import cupy failed: {type(e).__name__}: {e}")
        return
    try:
        cp, benches = cupy_benches(kernels_cu)
        meta = cupy_meta(cp)
    except Exception as e:  # noqa: BLE001
        skip("cupy", f"setup failed: {type(e).__name__}: {e}")
        return
    run_all("cupy", benches)
    print(json.dumps({"name": "_meta", "peer": "cupy", **meta}), flush=True)


def run_torch(kernels_cu):
    try:
        import torch  # noqa: F401
    except Exception as e:  # noqa: BLE001
        skip("torch", f"import torch failed: {type(e).__name__}: {e}")
        return
    try:
        torch, benches, no_sleep = torch_benches()
        meta = torch_meta(torch)
    except Exception as e:  # noqa: BLE001
        skip("torch", f"setup failed: {type(e).__name__}: {e}")
        return
    if no_sleep:
        for bench_id in ("launch_empty", "launch_switch", "launch_sync"):
            if ONLY is None or bench_id in ONLY:
                skip("torch", "torch.cuda._sleep is not available: torch has no empty kernel",
                     bench_id)
    run_all("torch", benches)
    print(json.dumps({"name": "_meta", "peer": "torch", **meta}), flush=True)


PEERS = {"cupy": run_cupy, "torch": run_torch}


def main(argv):
    global ONLY
    if "--only" in argv:
        at = argv.index("--only")
        if at + 1 >= len(argv):
            print("--only needs a list of benchmark ids, e.g. --only sin_1m,sum_64m", file=sys.stderr)
            return 2
        ONLY = set(filter(None, argv[at + 1].split(",")))
        argv = argv[:at] + argv[at + 2:]
    if len(argv) < 2:
        print(f"usage: {argv[0]} path/to/kernels.cu [cupy] [torch] [--only id,id,...]",
              file=sys.stderr)
        return 2
    kernels_cu, peers = argv[1], argv[2:] or list(PEERS)
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        print(f"unknown peer(s): {', '.join(unknown)}; choose from {list(PEERS)}", file=sys.stderr)
        return 2
    for peer in peers:
        PEERS[peer](kernels_cu)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
