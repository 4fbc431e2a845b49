// C baseline for the cuda-tasks benchmark suite.
//
// Host code only: driver API (cuda.h) + cuBLAS; the kernels come from
// kernels.ptx (built from packages/examples/src/kernels/kernels.cu), given as argv[1].
//
// Every benchmark is a batch that is warmed up, then run kRepeats times; the
// reported value is the median of the per-run results, in microseconds per
// operation. Output: one JSON object per line on stdout.
//
//   build: ./build.sh [OUT_DIR]
//   run:   /tmp/cuda-tasks-bench/bench ../../packages/examples/src/kernels/kernels.ptx

#include <cublas_v2.h>
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

// ---------------------------------------------------------------------------
// Error checking

#define CHECK(call)                                                                        \
  do {                                                                                     \
    CUresult r_ = (call);                                                                  \
    if (r_ != CUDA_SUCCESS) {                                                              \
      const char* name_ = nullptr;                                                         \
      cuGetErrorName(r_, &name_);                                                          \
      fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call,            \
              name_ ? name_ : "unknown CUresult", (int)r_);                                \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

#define CHECK_CUBLAS(call)                                                                 \
  do {                                                                                     \
    cublasStatus_t s_ = (call);                                                            \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                     \
      fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call,            \
              cublasGetStatusName(s_), (int)s_);                                           \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

// cuStreamQuery answers CUDA_ERROR_NOT_READY for a busy stream: not an error.
static bool stream_done(CUstream s) {
  CUresult r = cuStreamQuery(s);
  if (r == CUDA_ERROR_NOT_READY) return false;
  CHECK(r);
  return true;
}

// ---------------------------------------------------------------------------
// Timing

static const int kRepeats = 15;
static const int kWarmups = 3;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

// Runs `run` kWarmups times untimed, then kRepeats times; `run` performs one
// batch and returns its own measurement (microseconds per operation). Returns
// the median of the kRepeats measurements.
template <class Run>
static double repeat_median(Run run) {
  for (int i = 0; i < kWarmups; i++) run();
  std::vector<double> samples;
  for (int i = 0; i < kRepeats; i++) samples.push_back(run());
  return median(samples);
}

static void emit(const char* name, double median_us, const char* note) {
  printf("{\"name\":\"%s\",\"median_us\":%.4f,\"unit\":\"us/op\",\"note\":\"%s\"}\n", name,
         median_us, note);
  fflush(stdout);
}

// ---------------------------------------------------------------------------
// Setup helpers

static std::string read_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    exit(1);
  }
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  fclose(f);
  return text;
}

// Device buffer of `count` floats filled with uniform values in [-1, 1).
static CUdeviceptr random_floats(size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> host(count);
  for (float& x : host) x = dist(gen);
  CUdeviceptr d;
  CHECK(cuMemAlloc(&d, count * sizeof(float)));
  CHECK(cuMemcpyHtoD(d, host.data(), count * sizeof(float)));
  return d;
}

static cublasHandle_t make_handle(CUstream stream) {
  cublasHandle_t h;
  CHECK_CUBLAS(cublasCreate(&h));
  CHECK_CUBLAS(cublasSetStream(h, (cudaStream_t)stream));
  CHECK_CUBLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  CHECK_CUBLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // plain FP32, no TF32
  return h;
}

// C = A * B, all n x n column-major floats.
static void sgemm(cublasHandle_t h, int n, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) {
  const float alpha = 1.0f, beta = 0.0f;
  CHECK_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, (const float*)a, n,
                           (const float*)b, n, &beta, (float*)c, n));
}

// ---------------------------------------------------------------------------

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s path/to/kernels.ptx\n", argv[0]);
    return 2;
  }

  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));

  std::string ptx = read_file(argv[1]);
  CUmodule mod;
  CHECK(cuModuleLoadData(&mod, ptx.c_str()));
  CUfunction empty_kernel, sin_inplace, axpb_f32;
  CHECK(cuModuleGetFunction(&empty_kernel, mod, "empty_kernel"));
  CHECK(cuModuleGetFunction(&sin_inplace, mod, "sin_inplace"));
  CHECK(cuModuleGetFunction(&axpb_f32, mod, "axpb_f32"));

  CUstream stream, stream2;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCreate(&stream2, CU_STREAM_NON_BLOCKING));

  auto launch_empty = [&](CUstream s) {
    CHECK(cuLaunchKernel(empty_kernel, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr));
  };

  // Launch benchmarks: host time of the launches only; the synchronize that
  // drains the queue runs after the clock stops.
  const int kLaunches = 10000;

  emit("launch_empty", repeat_median([&] {
         double t0 = now_us();
         for (int i = 0; i < kLaunches; i++) launch_empty(stream);
         double t = now_us() - t0;
         CHECK(cuStreamSynchronize(stream));
         return t / kLaunches;
       }),
       "cuLaunchKernel empty_kernel <<<1,1>>>, 10000 per batch, host-timed, sync excluded");

  {
    // The same launch through cuLaunchKernelEx (a CUlaunchConfig built once).
    CUlaunchConfig config = {};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = config.blockDimZ = 1;
    config.hStream = stream;
    emit("launch_empty_ex", repeat_median([&] {
           double t0 = now_us();
           for (int i = 0; i < kLaunches; i++)
             CHECK(cuLaunchKernelEx(&config, empty_kernel, nullptr, nullptr));
           double t = now_us() - t0;
           CHECK(cuStreamSynchronize(stream));
           return t / kLaunches;
         }),
         "cuLaunchKernelEx empty_kernel <<<1,1>>>, config built once, 10000 per batch, "
         "host-timed, sync excluded");
  }

  {
    CUdeviceptr y = 0, x = 0;  // never dereferenced: n = 0
    float a = 2.0f, b = 1.0f;
    unsigned long long n = 0;
    void* params[] = {&y, &x, &a, &b, &n};
    emit("launch_args2", repeat_median([&] {
           double t0 = now_us();
           for (int i = 0; i < kLaunches; i++)
             CHECK(cuLaunchKernel(axpb_f32, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
           double t = now_us() - t0;
           CHECK(cuStreamSynchronize(stream));
           return t / kLaunches;
         }),
         "cuLaunchKernel axpb_f32 (5 params, n=0) <<<1,1>>>, params built once, 10000 per "
         "batch, host-timed, sync excluded");
  }

  emit("launch_switch", repeat_median([&] {
         double t0 = now_us();
         for (int i = 0; i < kLaunches; i++) launch_empty(i % 2 ? stream2 : stream);
         double t = now_us() - t0;
         CHECK(cuStreamSynchronize(stream));
         CHECK(cuStreamSynchronize(stream2));
         return t / kLaunches;
       }),
       "empty_kernel alternating streams A,B,A,B..., 10000 per batch, host-timed, sync excluded");

  const int kRoundTrips = 2000;

  emit("launch_sync", repeat_median([&] {
         double t0 = now_us();
         for (int i = 0; i < kRoundTrips; i++) {
           launch_empty(stream);
           CHECK(cuStreamSynchronize(stream));
         }
         return (now_us() - t0) / kRoundTrips;
       }),
       "empty_kernel + cuStreamSynchronize round trip, 2000 per batch");

  emit("launch_query_spin", repeat_median([&] {
         double t0 = now_us();
         for (int i = 0; i < kRoundTrips; i++) {
           launch_empty(stream);
           while (!stream_done(stream)) {
           }
         }
         return (now_us() - t0) / kRoundTrips;
       }),
       "empty_kernel + busy loop on cuStreamQuery until done, 2000 per batch");

  {
    CUmemoryPool pool;
    CHECK(cuDeviceGetDefaultMemPool(&pool, dev));
    cuuint64_t threshold = UINT64_MAX;
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    const int kPairs = 10000;
    // Microseconds per pair of `bytes`, 10000 pairs per batch, the drain not timed.
    auto pairs = [&](size_t bytes) {
      return repeat_median([&] {
        double t0 = now_us();
        for (int i = 0; i < kPairs; i++) {
          CUdeviceptr p;
          CHECK(cuMemAllocAsync(&p, bytes, stream));
          CHECK(cuMemFreeAsync(p, stream));
        }
        double t = now_us() - t0;
        CHECK(cuStreamSynchronize(stream));
        return t / kPairs;
      });
    };
    emit("alloc_free", pairs(256),
         "cuMemAllocAsync(256 B) + cuMemFreeAsync pair, default pool, release threshold "
         "UINT64_MAX, 10000 per batch, sync excluded");
    // The same pair at 128 KiB: the size of ours' alloc_free_driver row (past our cache).
    emit("alloc_free_128k", pairs(128 * 1024),
         "cuMemAllocAsync(128 KiB) + cuMemFreeAsync pair, default pool, release threshold "
         "UINT64_MAX, 10000 per batch, sync excluded");
  }

  {
    CUevent ev;
    CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    const int kRecords = 10000;
    emit("event_record", repeat_median([&] {
           double t0 = now_us();
           for (int i = 0; i < kRecords; i++) CHECK(cuEventRecord(ev, stream));
           double t = now_us() - t0;
           CHECK(cuStreamSynchronize(stream));
           return t / kRecords;
         }),
         "cuEventRecord, CU_EVENT_DISABLE_TIMING, 10000 per batch, sync excluded");
    CHECK(cuEventDestroy(ev));
  }

  {
    const int kQueries = 10000;
    CHECK(cuStreamSynchronize(stream));
    emit("stream_query", repeat_median([&] {
           double t0 = now_us();
           for (int i = 0; i < kQueries; i++) CHECK(cuStreamQuery(stream));
           return (now_us() - t0) / kQueries;
         }),
         "cuStreamQuery on an idle stream, 10000 per batch");
  }

  // cuBLAS: one handle per stream, host pointer mode, default (FP32) math.
  cublasHandle_t h1 = make_handle(stream);
  cublasHandle_t h2 = make_handle(stream2);

  {
    const int n = 8, kCalls = 10000;
    CUdeviceptr a = random_floats(n * n, 1), b = random_floats(n * n, 2);
    CUdeviceptr c = random_floats(n * n, 3);
    emit("sgemm_8", repeat_median([&] {
           double t0 = now_us();
           for (int i = 0; i < kCalls; i++) sgemm(h1, n, a, b, c);
           double t = now_us() - t0;
           CHECK(cuStreamSynchronize(stream));
           return t / kCalls;
         }),
         "cublasSgemm 8x8x8, 10000 per batch, host-timed issue rate, sync excluded");
    CHECK(cuMemFree(a));
    CHECK(cuMemFree(b));
    CHECK(cuMemFree(c));
  }

  const int N = 1024;
  const size_t NN = (size_t)N * N;
  CUdeviceptr a1 = random_floats(NN, 11), b1 = random_floats(NN, 12), c1 = random_floats(NN, 13);
  CUdeviceptr a2 = random_floats(NN, 21), b2 = random_floats(NN, 22), c2 = random_floats(NN, 23);

  {
    const int kCalls = 20;
    CUevent start, stop;
    CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    emit("sgemm_1024", repeat_median([&] {
           CHECK(cuEventRecord(start, stream));
           for (int i = 0; i < kCalls; i++) sgemm(h1, N, a1, b1, c1);
           CHECK(cuEventRecord(stop, stream));
           CHECK(cuEventSynchronize(stop));
           float ms;
           CHECK(cuEventElapsedTime(&ms, start, stop));
           return 1000.0 * ms / kCalls;
         }),
         "cublasSgemm 1024x1024x1024 FP32 (no TF32), device time per call from events, 20 "
         "per batch");
    CHECK(cuEventDestroy(start));
    CHECK(cuEventDestroy(stop));
  }

  {
    unsigned long long n = NN;
    const unsigned block = 256, grid = (unsigned)((NN + block - 1) / block);
    CUdeviceptr c1_arg = c1, c2_arg = c2;
    void* sin1[] = {&c1_arg, &n};
    void* sin2[] = {&c2_arg, &n};
    // One job: C = A * B, then C = sin(C) on the handle's stream.
    auto job = [&](cublasHandle_t h, CUstream s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c,
                   void** sin_params) {
      sgemm(h, N, a, b, c);
      CHECK(cuLaunchKernel(sin_inplace, grid, 1, 1, block, 1, 1, 0, s, sin_params, nullptr));
    };

    emit("seed_serial", repeat_median([&] {
           double t0 = now_us();
           job(h1, stream, a1, b1, c1, sin1);
           job(h1, stream, a2, b2, c2, sin2);
           CHECK(cuStreamSynchronize(stream));
           return now_us() - t0;
         }),
         "2 jobs (sgemm 1024^3 + sin_inplace) on one stream, host wall time issue to sync, per "
         "iteration");

    emit("seed_concurrent", repeat_median([&] {
           double t0 = now_us();
           job(h1, stream, a1, b1, c1, sin1);
           job(h2, stream2, a2, b2, c2, sin2);
           CHECK(cuStreamSynchronize(stream));
           CHECK(cuStreamSynchronize(stream2));
           return now_us() - t0;
         }),
         "2 jobs (sgemm 1024^3 + sin_inplace) on 2 streams with one cuBLAS handle each, host "
         "wall time issue to both synced, per iteration");
  }

  {
    const int kStreams = 100;
    std::vector<CUstream> streams(kStreams);
    for (CUstream& s : streams) CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    emit("tasks100", repeat_median([&] {
           double t0 = now_us();
           for (CUstream s : streams) launch_empty(s);
           for (CUstream s : streams) CHECK(cuStreamSynchronize(s));
           return now_us() - t0;
         }),
         "100 streams: launch empty_kernel on each, then synchronize each; total us per batch");
    for (CUstream s : streams) CHECK(cuStreamDestroy(s));
  }

  char name[256];
  CHECK(cuDeviceGetName(name, sizeof name, dev));
  int driver;
  CHECK(cuDriverGetVersion(&driver));
  printf("{\"name\":\"_meta\",\"device\":\"%s\",\"driver\":%d}\n", name, driver);

  for (CUdeviceptr p : {a1, b1, c1, a2, b2, c2}) CHECK(cuMemFree(p));
  CHECK_CUBLAS(cublasDestroy(h1));
  CHECK_CUBLAS(cublasDestroy(h2));
  CHECK(cuStreamDestroy(stream));
  CHECK(cuStreamDestroy(stream2));
  CHECK(cuModuleUnload(mod));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  return 0;
}
