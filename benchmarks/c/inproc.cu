// The C baseline as a shared library, for the same-process comparison (src/paired.ts):
// the loops of bench.cu, called through koffi from the Node process that runs ours, on the
// same context, the same CUfunction and the same stream, batch after batch alternating with
// ours. Two processes run one after the other see the host drift between them (C's own
// empty launch measured 4.0 to 4.6 us across the rounds of one run); one process does not.
//
// Every timed function returns microseconds per operation (host time of the issue loop; the
// drain after it is not timed, except in the chain functions, whose comments say so), or a
// negative CUresult / cublasStatus_t on failure.
//
//   build: nvcc -O2 -arch=sm_90 -shared -Xcompiler -fPIC -o libinproc.so inproc.cu -lcuda -lcublas
//   (build.sh builds it beside the bench binary)

#include <cublas_v2.h>
#include <cuda.h>

#include <chrono>
#include <cstdint>

static double now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

#define TRY(call)                              \
  do {                                         \
    CUresult r_ = (call);                      \
    if (r_ != CUDA_SUCCESS) return -(double)r_; \
  } while (0)

#define TRY_CUBLAS(call)                                  \
  do {                                                    \
    cublasStatus_t s_ = (call);                           \
    if (s_ != CUBLAS_STATUS_SUCCESS) return -1000.0 - s_; \
  } while (0)

static CUfunction fn(uint64_t f) { return (CUfunction)(uintptr_t)f; }
static CUstream st(uint64_t s) { return (CUstream)(uintptr_t)s; }

extern "C" {

// bench.cu launch_empty: cuLaunchKernel <<<1,1>>>, no parameters.
double inproc_launch_empty(uint64_t f, uint64_t s, int n) {
  double t0 = now_us();
  for (int i = 0; i < n; i++) TRY(cuLaunchKernel(fn(f), 1, 1, 1, 1, 1, 1, 0, st(s), nullptr, nullptr));
  double t = now_us() - t0;
  TRY(cuStreamSynchronize(st(s)));
  return t / n;
}

// launch_empty through cuLaunchKernelEx, as launch() calls it (the same CUlaunchConfig:
// 1x1x1 grid and block, no shared memory, no attributes), for the bare-koffi pair.
double inproc_launch_empty_ex(uint64_t f, uint64_t s, int n) {
  CUlaunchConfig config = {};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  config.hStream = st(s);
  double t0 = now_us();
  for (int i = 0; i < n; i++) TRY(cuLaunchKernelEx(&config, fn(f), nullptr, nullptr));
  double t = now_us() - t0;
  TRY(cuStreamSynchronize(st(s)));
  return t / n;
}

// A function that does nothing, with cuLaunchKernelEx's shape (four 64-bit arguments, an int
// back): koffi's own cost per call, timed from JavaScript (src/paired.ts).
int inproc_noop(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  (void)a;
  (void)b;
  (void)c;
  (void)d;
  return 0;
}

// The same no-op called from C through a volatile function pointer (not inlined).
double inproc_noop_loop(int n) {
  int (*volatile call)(uint64_t, uint64_t, uint64_t, uint64_t) = inproc_noop;
  int sum = 0;
  double t0 = now_us();
  for (int i = 0; i < n; i++) sum += call(1, 2, 3, 4);
  double t = now_us() - t0;
  return sum == 0 ? t / n : -1.0;
}

// bench.cu launch_switch: the same launch alternating two streams.
double inproc_launch_switch(uint64_t f, uint64_t s1, uint64_t s2, int n) {
  double t0 = now_us();
  for (int i = 0; i < n; i++)
    TRY(cuLaunchKernel(fn(f), 1, 1, 1, 1, 1, 1, 0, st(i % 2 ? s2 : s1), nullptr, nullptr));
  double t = now_us() - t0;
  TRY(cuStreamSynchronize(st(s1)));
  TRY(cuStreamSynchronize(st(s2)));
  return t / n;
}

// bench.cu launch_sync: launch + cuStreamSynchronize round trips (blocks this thread).
double inproc_launch_sync(uint64_t f, uint64_t s, int n) {
  double t0 = now_us();
  for (int i = 0; i < n; i++) {
    TRY(cuLaunchKernel(fn(f), 1, 1, 1, 1, 1, 1, 0, st(s), nullptr, nullptr));
    TRY(cuStreamSynchronize(st(s)));
  }
  return (now_us() - t0) / n;
}

// bench.cu alloc_free / alloc_free_128k: stream-ordered pairs from the device's default pool.
double inproc_alloc_free(uint64_t s, uint64_t bytes, int n) {
  double t0 = now_us();
  for (int i = 0; i < n; i++) {
    CUdeviceptr p;
    TRY(cuMemAllocAsync(&p, (size_t)bytes, st(s)));
    TRY(cuMemFreeAsync(p, st(s)));
  }
  double t = now_us() - t0;
  TRY(cuStreamSynchronize(st(s)));
  return t / n;
}

// bench.cu event_record: cuEventRecord of a timing-free event.
double inproc_event_record(uint64_t s, int n) {
  CUevent ev;
  TRY(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  double t0 = now_us();
  for (int i = 0; i < n; i++) TRY(cuEventRecord(ev, st(s)));
  double t = now_us() - t0;
  TRY(cuStreamSynchronize(st(s)));
  TRY(cuEventDestroy(ev));
  return t / n;
}

// bench.cu make_handle: a cuBLAS handle of C's own, host pointer mode, FP32 math, on `s`.
// Returns the handle (0 on failure).
uint64_t inproc_cublas_create(uint64_t s) {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 0;
  if (cublasSetStream(h, (cudaStream_t)st(s)) != CUBLAS_STATUS_SUCCESS ||
      cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST) != CUBLAS_STATUS_SUCCESS ||
      cublasSetMathMode(h, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(h);
    return 0;
  }
  return (uint64_t)(uintptr_t)h;
}

int inproc_cublas_destroy(uint64_t h) { return (int)cublasDestroy((cublasHandle_t)(uintptr_t)h); }

static cublasStatus_t sgemm(uint64_t h, int n, uint64_t a, uint64_t b, uint64_t c) {
  const float alpha = 1.0f, beta = 0.0f;
  return cublasSgemm((cublasHandle_t)(uintptr_t)h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha,
                     (const float*)(uintptr_t)a, n, (const float*)(uintptr_t)b, n, &beta,
                     (float*)(uintptr_t)c, n);
}

// bench.cu sgemm_8: `calls` cublasSgemm n x n x n on the handle's stream `s`, issue rate.
double inproc_sgemm(uint64_t h, uint64_t s, int n, uint64_t a, uint64_t b, uint64_t c,
                    int calls) {
  double t0 = now_us();
  for (int i = 0; i < calls; i++) TRY_CUBLAS(sgemm(h, n, a, b, c));
  double t = now_us() - t0;
  TRY(cuStreamSynchronize(st(s)));
  return t / calls;
}

// bench.cu seed_serial / seed_concurrent: one iteration of 2 jobs (sgemm n^3 + sin_inplace),
// on one stream (h2 and s2 unused when concurrent is 0) or one stream and handle per job;
// host wall time from the first issue until every stream is synchronized, in us.
double inproc_seed(uint64_t h1, uint64_t h2, uint64_t s1, uint64_t s2, uint64_t sin_f, int n,
                   uint64_t a1, uint64_t b1, uint64_t c1, uint64_t a2, uint64_t b2, uint64_t c2,
                   int concurrent) {
  unsigned long long count = (unsigned long long)n * n;
  const unsigned block = 256, grid = (unsigned)((count + block - 1) / block);
  CUdeviceptr c1_arg = c1, c2_arg = c2;
  void* sin1[] = {&c1_arg, &count};
  void* sin2[] = {&c2_arg, &count};
  uint64_t hb = concurrent ? h2 : h1, sb = concurrent ? s2 : s1;
  double t0 = now_us();
  TRY_CUBLAS(sgemm(h1, n, a1, b1, c1));
  TRY(cuLaunchKernel(fn(sin_f), grid, 1, 1, block, 1, 1, 0, st(s1), sin1, nullptr));
  TRY_CUBLAS(sgemm(hb, n, a2, b2, c2));
  TRY(cuLaunchKernel(fn(sin_f), grid, 1, 1, block, 1, 1, 0, st(sb), sin2, nullptr));
  TRY(cuStreamSynchronize(st(s1)));
  if (concurrent) TRY(cuStreamSynchronize(st(s2)));
  return now_us() - t0;
}

// bench.cu tasks100: launch on each of `count` streams, then synchronize each; total us.
double inproc_tasks(uint64_t f, const uint64_t* streams, int count) {
  double t0 = now_us();
  for (int i = 0; i < count; i++)
    TRY(cuLaunchKernel(fn(f), 1, 1, 1, 1, 1, 1, 0, st(streams[i]), nullptr, nullptr));
  for (int i = 0; i < count; i++) TRY(cuStreamSynchronize(st(streams[i])));
  return now_us() - t0;
}

// The scaling benchmark's latency-bound job at K = 1 (scaling.cu's, one job at a time on one
// stream): `steps` axpb_f32 launches over n floats, y <- a x + b and x <- a y + b in turn, and
// after every `sync_every` of them (and after the last) a wait for the stream: a cuStreamQuery
// spin with `poll` (scaling.cu's one thread polling, its faster variant at K = 1), else
// cuStreamSynchronize. `jobs` jobs one after another; host time per job, every wait included.
double inproc_latency_jobs(uint64_t f, uint64_t s, uint64_t x, uint64_t y, unsigned long long n,
                           unsigned grid, unsigned block, float a, float b, int steps,
                           int sync_every, int poll, int jobs) {
  CUdeviceptr xs = x, ys = y;
  void* to_y[] = {&ys, &xs, &a, &b, &n};
  void* to_x[] = {&xs, &ys, &a, &b, &n};
  double t0 = now_us();
  for (int j = 0; j < jobs; j++) {
    for (int i = 0; i < steps; i++) {
      TRY(cuLaunchKernel(fn(f), grid, 1, 1, block, 1, 1, 0, st(s), i % 2 == 0 ? to_y : to_x,
                         nullptr));
      if ((i + 1) % sync_every == 0 || i == steps - 1) {
        if (poll) {
          CUresult r;
          while ((r = cuStreamQuery(st(s))) == CUDA_ERROR_NOT_READY) {
          }
          TRY(r);
        } else {
          TRY(cuStreamSynchronize(st(s)));
        }
      }
    }
  }
  return (now_us() - t0) / jobs;
}

// A chain of `steps` axpb_f32 kernels (y = a x + b over n floats), as paired.ts's: scratch <-
// a x + b, out <- a scratch + b, scratch <- ..., the last writing `out`. `chains` chains issued
// back to back, then drained; host time from the first issue until drained, per chain.
double inproc_chain_eager(uint64_t f, uint64_t s, uint64_t x, uint64_t scratch, uint64_t out,
                          unsigned long long n, int steps, unsigned grid, unsigned block, float a,
                          float b, int chains) {
  CUdeviceptr source = x, targets[2] = {scratch, out}, target = scratch;
  void* params[] = {&target, &source, &a, &b, &n};
  double t0 = now_us();
  for (int c = 0; c < chains; c++) {
    source = x;
    for (int i = 0; i < steps; i++) {
      target = targets[i % 2];
      TRY(cuLaunchKernel(fn(f), grid, 1, 1, block, 1, 1, 0, st(s), params, nullptr));
      source = target;
    }
  }
  TRY(cuStreamSynchronize(st(s)));
  return (now_us() - t0) / chains;
}

// The same chains as replays of a graph paired.ts captured (its CUgraphExec): cuGraphLaunch
// `chains` times, then drained; host time per replay, the drain included.
double inproc_graph_launch(uint64_t exec, uint64_t s, int chains) {
  double t0 = now_us();
  for (int c = 0; c < chains; c++) TRY(cuGraphLaunch((CUgraphExec)(uintptr_t)exec, st(s)));
  TRY(cuStreamSynchronize(st(s)));
  return (now_us() - t0) / chains;
}

}  // extern "C"
