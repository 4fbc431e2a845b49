#!/usr/bin/env python3
"""Concurrency scaling, the Python peers' side (CuPy, PyTorch).

For each job shape and each K, K jobs started together on K Python threads, each thread with
its own stream (`with stream:` in CuPy, `with torch.cuda.stream(s):` in PyTorch: the
documented way to get concurrency from either), a synchronize point being
`stream.synchronize()`; and a serial batch (jobs one after another on one stream). The threads
are a pool created once, each woken by its own semaphore per batch. The jobs are those of
c/scaling.cu and src/scaling.ts (see ../README.md, "Concurrency scaling"); their sizes come on
the command line.

Usage: python3 scaling.py path/to/kernels.cu [key=value ...] [peers=cupy,torch]

Prints one JSON line per (shape, K, mode):
    {"name": "scaling", "system": "cupy", "shape": "latency", "k": 4, "mode": "concurrent",
     "jobs": 4, "seconds": [...]}
A peer that cannot be imported prints {"name": "_skip", "system": ..., "reason": ...} and the
run goes on with the other.
"""

import json
import math
import sys
import threading
import time

DEFAULTS = {
    "ks": [1, 2, 4, 8, 16, 32, 64],
    "shapes": ["latency", "mixed", "control"],
    "warmups": 2,
    "min_samples": 9,
    "sample_jobs": 512,
    "serial_jobs": 8,
    "latency_steps": 20,
    "latency_sync_every": 5,
    "latency_n": 65536,
    "mixed_steps": 10,
    "mixed_n": 256,
    "control_steps": 4,
    "control_n": 2048,
    "seed": 1000,
    "peers": ["cupy", "torch"],
}
BLOCK = 256


def parse_config(arguments):
    config = dict(DEFAULTS)
    for argument in arguments:
        key, equals, value = argument.partition("=")
        if not equals or key not in DEFAULTS:
            raise SystemExit(f"scaling.py: unknown setting '{argument}'")
        if key in ("ks",):
            config[key] = [int(k) for k in value.split(",") if k]
        elif key in ("shapes", "peers"):
            config[key] = [s for s in value.split(",") if s]
        else:
            config[key] = int(value)
    return config


def emit(system, shape, k, mode, jobs, seconds):
    line = {"name": "scaling", "system": system, "shape": shape, "k": k, "mode": mode,
            "jobs": jobs, "seconds": [float(f"{s:.9g}") for s in seconds]}
    print(json.dumps(line), flush=True)


def skip(system, reason):
    print(json.dumps({"name": "_skip", "system": system, "reason": reason}), flush=True)


class Pool:
    """Worker threads, one per job slot, each woken by its own semaphore for a batch."""

    def __init__(self, workers, setup):
        self.start = [threading.Semaphore(0) for _ in range(workers)]
        self.done = threading.Semaphore(0)
        self.lock = threading.Lock()
        self.remaining = 0
        self.job = None
        self.quit = False
        self.errors = []
        self.threads = [threading.Thread(target=self._worker, args=(i, setup), daemon=True)
                        for i in range(workers)]
        for thread in self.threads:
            thread.start()

    def _worker(self, index, setup):
        setup(index)  # per-thread state of the library (current device)
        while True:
            self.start[index].acquire()
            if self.quit:
                return
            try:
                self.job(index)
            except BaseException as error:  # noqa: BLE001 - reported by batch()
                self.errors.append(error)
            with self.lock:
                self.remaining -= 1
                last = self.remaining == 0
            if last:
                self.done.release()

    def batch(self, job, k):
        """Runs job(i) for i < k on threads 0..k-1, started together; returns the seconds."""
        self.job = job
        self.remaining = k
        t0 = time.perf_counter()
        for i in range(k):
            self.start[i].release()
        self.done.acquire()
        seconds = time.perf_counter() - t0
        if self.errors:
            raise self.errors[0]
        return seconds

    def close(self):
        self.quit = True
        for semaphore in self.start:
            semaphore.release()
        for thread in self.threads:
            thread.join()


def samples_for(config, k):
    return max(config["min_samples"], math.ceil(config["sample_jobs"] / k))


def measure(config, samples, batch):
    for _ in range(config["warmups"]):
        batch()
    return [batch() for _ in range(samples)]


def segments(config, shape):
    """The job as segments: the steps issued between two synchronize points."""
    if shape == "latency":
        steps, every = config["latency_steps"], config["latency_sync_every"]
        return [range(first, min(steps, first + every)) for first in range(0, steps, every)]
    if shape == "mixed":
        return [range(config["mixed_steps"])]
    return [range(config["control_steps"])]


def run_peer(system, config, make_slot, issue, stream_of, enter, setup_thread):
    """Runs every shape and K for one peer. issue(slot, shape, steps) issues on the current
    stream; enter(slot) is the context manager that makes the slot's stream current."""
    max_k = max(config["ks"])
    slots = [make_slot(i) for i in range(max_k)]
    for slot in slots:
        stream_of(slot).synchronize()

    def job(slot, shape):
        with enter(slot):
            for steps in segments(config, shape):
                issue(slot, shape, steps)
                stream_of(slot).synchronize()

    pool = Pool(max_k, setup_thread)
    try:
        for shape in config["shapes"]:
            def serial():
                t0 = time.perf_counter()
                for _ in range(config["serial_jobs"]):
                    job(slots[0], shape)
                return time.perf_counter() - t0

            emit(system, shape, 1, "serial", config["serial_jobs"],
                 measure(config, config["min_samples"], serial))
            for k in config["ks"]:
                seconds = measure(config, samples_for(config, k),
                                  lambda: pool.batch(lambda i: job(slots[i], shape), k))
                emit(system, shape, k, "concurrent", k, seconds)
    finally:
        pool.close()


# ---------------------------------------------------------------------------
# CuPy: RawKernel axpb_f32 (kernels.cu through NVRTC), cupy.matmul, cuRAND's host API.


def run_cupy(kernels_cu, config):
    import cupy as cp
    from cupy.cuda import curand

    with open(kernels_cu) as f:
        module = cp.RawModule(code=f.read())
    axpb = module.get_function("axpb_f32")
    half, one, zero = cp.float32(0.5), cp.float32(1.0), cp.float32(0.0)
    latency_n = cp.uint64(config["latency_n"])
    mixed_count = config["mixed_n"] ** 2
    mixed_count_argument = cp.uint64(mixed_count)
    mixed_scale = cp.float32(1.0 / config["mixed_n"])
    latency_grid = ((config["latency_n"] + BLOCK - 1) // BLOCK,)
    mixed_grid = ((mixed_count + BLOCK - 1) // BLOCK,)

    class Slot:
        pass

    def make_slot(index):
        slot = Slot()
        slot.stream = cp.cuda.Stream(non_blocking=True)
        slot.generator = curand.createGenerator(curand.CURAND_RNG_PSEUDO_PHILOX4_32_10)
        curand.setPseudoRandomGeneratorSeed(slot.generator, config["seed"] + index)
        curand.setStream(slot.generator, slot.stream.ptr)
        with slot.stream:
            def uniform(shape):
                array = cp.empty(shape, dtype=cp.float32)
                curand.generateUniform(slot.generator, array.data.ptr, array.size)
                return array

            n, m = config["mixed_n"], config["control_n"]
            slot.latency_x, slot.latency_y = uniform(config["latency_n"]), uniform(config["latency_n"])
            slot.mixed_a, slot.mixed_b, slot.mixed_c = uniform((n, n)), uniform((n, n)), uniform((n, n))
            slot.control_a, slot.control_b, slot.control_c = (uniform((m, m)), uniform((m, m)),
                                                               uniform((m, m)))
        return slot

    def issue(slot, shape, steps):
        if shape == "latency":
            for step in steps:
                if step % 2 == 0:
                    axpb(latency_grid, (BLOCK,), (slot.latency_y, slot.latency_x, half, one, latency_n))
                else:
                    axpb(latency_grid, (BLOCK,), (slot.latency_x, slot.latency_y, half, one, latency_n))
        elif shape == "mixed":
            for _ in steps:
                curand.generateUniform(slot.generator, slot.mixed_a.data.ptr, mixed_count)
                cp.matmul(slot.mixed_a, slot.mixed_b, out=slot.mixed_c)
                axpb(mixed_grid, (BLOCK,),
                     (slot.mixed_b, slot.mixed_c, mixed_scale, zero, mixed_count_argument))
        else:
            for _ in steps:
                cp.matmul(slot.control_a, slot.control_b, out=slot.control_c)

    def setup_thread(_index):
        cp.cuda.Device(0).use()

    run_peer("cupy", config, make_slot, issue, lambda slot: slot.stream,
             lambda slot: slot.stream, setup_thread)
    print(json.dumps({"name": "_meta", "system": "cupy", "version": cp.__version__}), flush=True)


# ---------------------------------------------------------------------------
# PyTorch: no custom kernel, so the elementwise step is torch.add(1, x, alpha=0.5) (one kernel),
# the fill Tensor.uniform_ with a seeded CUDA generator (Philox), SGEMM torch.mm.


def run_torch(config):
    import torch

    from peers import set_fp32_matmul  # the same FP32 (no TF32) setting as the other peers

    if not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False")
    set_fp32_matmul(torch)
    device = torch.device("cuda")
    one = torch.ones((), device=device)
    mixed_scale = 1.0 / config["mixed_n"]

    class Slot:
        pass

    def make_slot(index):
        slot = Slot()
        slot.stream = torch.cuda.Stream()
        slot.generator = torch.Generator(device=device)
        slot.generator.manual_seed(config["seed"] + index)
        with torch.cuda.stream(slot.stream):
            def uniform(*shape):
                return torch.empty(*shape, device=device).uniform_(0, 1, generator=slot.generator)

            n, m = config["mixed_n"], config["control_n"]
            slot.latency_x, slot.latency_y = uniform(config["latency_n"]), uniform(config["latency_n"])
            slot.mixed_a, slot.mixed_b, slot.mixed_c = uniform(n, n), uniform(n, n), uniform(n, n)
            slot.control_a, slot.control_b, slot.control_c = uniform(m, m), uniform(m, m), uniform(m, m)
        return slot

    def issue(slot, shape, steps):
        if shape == "latency":
            for step in steps:
                if step % 2 == 0:
                    torch.add(one, slot.latency_x, alpha=0.5, out=slot.latency_y)
                else:
                    torch.add(one, slot.latency_y, alpha=0.5, out=slot.latency_x)
        elif shape == "mixed":
            for _ in steps:
                slot.mixed_a.uniform_(0, 1, generator=slot.generator)
                torch.mm(slot.mixed_a, slot.mixed_b, out=slot.mixed_c)
                torch.mul(slot.mixed_c, mixed_scale, out=slot.mixed_b)
        else:
            for _ in steps:
                torch.mm(slot.control_a, slot.control_b, out=slot.control_c)

    def setup_thread(_index):
        torch.cuda.set_device(0)

    run_peer("torch", config, make_slot, issue, lambda slot: slot.stream,
             lambda slot: torch.cuda.stream(slot.stream), setup_thread)
    print(json.dumps({"name": "_meta", "system": "torch", "version": torch.__version__}),
          flush=True)


def main(argv):
    if len(argv) < 2:
        print(f"usage: {argv[0]} path/to/kernels.cu [key=value ...]", file=sys.stderr)
        return 2
    kernels_cu, config = argv[1], parse_config(argv[2:])
    for peer in config["peers"]:
        if peer not in ("cupy", "torch"):
            print(f"unknown peer {peer}; choose from cupy, torch", file=sys.stderr)
            return 2
        try:
            __import__(peer)
        except Exception as error:  # noqa: BLE001 - report and go on with the other peer
            skip(peer, f"import {peer} failed: {type(error).__name__}: {error}")
            continue
        try:
            if peer == "cupy":
                run_cupy(kernels_cu, config)
            else:
                run_torch(config)
        except Exception as error:  # noqa: BLE001
            skip(peer, f"{type(error).__name__}: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
