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

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

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
// Interprocess event: a reader in another process waits on the GPU for the writer's event.

// Writes all of `data`; false if the other process is gone.
static bool write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n <= 0) return false;
    p += n;
    size -= (size_t)n;
  }
  return true;
}

// Reads exactly `size` bytes; false if the other process is gone first.
static bool read_all(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, p + got, size - got);
    if (n <= 0) return false;
    got += (size_t)n;
  }
  return true;
}

// The reader (`bench --ipc-reader kernels.ptx`, started by `ipc_event_wait` with its stdin and
// stdout as pipes): reads the writer's event and flag handles, answers one byte when ready,
// then for each 'g' makes its stream wait for the event, runs `stamp`, synchronizes and writes
// back the stamp's global time (ns) and the flag it saw, 8 bytes each. Ends at 'q' or EOF.
static int ipc_reader(const char* ptx_path) {
  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  std::string ptx = read_file(ptx_path);
  CUmodule mod;
  CHECK(cuModuleLoadData(&mod, ptx.c_str()));
  CUfunction stamp;
  CHECK(cuModuleGetFunction(&stamp, mod, "stamp"));
  CUipcEventHandle event_handle;
  CUipcMemHandle flag_handle;
  if (!read_all(0, &event_handle, sizeof event_handle) ||
      !read_all(0, &flag_handle, sizeof flag_handle)) {
    fprintf(stderr, "ipc_event_wait: the reader got no handles\n");
    return 1;
  }
  CUevent event;
  CHECK(cuIpcOpenEventHandle(&event, event_handle));
  CUdeviceptr flag, out;
  CHECK(cuIpcOpenMemHandle(&flag, flag_handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  CHECK(cuMemAlloc(&out, 16));
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  if (!write_all(1, "r", 1)) return 1;
  char command;
  while (read_all(0, &command, 1) && command == 'g') {
    CHECK(cuStreamWaitEvent(s, event, 0));
    void* args[] = {&out, &flag};
    CHECK(cuLaunchKernel(stamp, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
    CHECK(cuStreamSynchronize(s));
    unsigned int host[4];
    CHECK(cuMemcpyDtoH(host, out, sizeof host));
    uint64_t reply[2] = {((uint64_t)host[1] << 32) | host[0], host[2]};
    if (!write_all(1, reply, sizeof reply)) return 1;
  }
  CHECK(cuStreamDestroy(s));
  CHECK(cuMemFree(out));
  CHECK(cuIpcCloseMemHandle(flag));
  CHECK(cuEventDestroy(event));
  CHECK(cuModuleUnload(mod));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  return 0;
}

// A failed driver call of the writer's side: `why` gets its name, and the caller skips the row.
#define SOFT_CHECK(call)                                                                   \
  do {                                                                                     \
    CUresult r_ = (call);                                                                  \
    if (r_ != CUDA_SUCCESS) {                                                              \
      const char* name_ = nullptr;                                                         \
      cuGetErrorName(r_, &name_);                                                          \
      why = std::string(#call) + " failed: " + (name_ ? name_ : "unknown CUresult");     \
      return false;                                                                        \
    }                                                                                      \
  } while (0)

// The writer: starts the reader (this program again, `--ipc-reader`), shares an interprocess
// event and 16 bytes of flag memory with it (legacy IPC handles through a pipe), then per
// round: `spin_then_flag` for 20 ms on `stream`, the event recorded after it, 'g' to the
// reader, whose wait is queued long before the spin ends. `*median_us` gets the median over
// the rounds of the reader's stamp minus the time the spin ended, in us of the GPU's global
// timer. Returns false with `why` where the row cannot run here (interprocess handles refused,
// as in a container without a shared IPC namespace; the reader failed) or a round went wrong
// (the reader ran before the flag was set: its wait did not hold it).
static bool run_ipc_rounds(CUfunction spin_then_flag, CUstream stream, int to_reader,
                           int from_reader, double* median_us, std::string& why) {
  CUevent event;
  SOFT_CHECK(cuEventCreate(&event, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  CUdeviceptr flag;
  SOFT_CHECK(cuMemAlloc(&flag, 16));
  CUipcEventHandle event_handle;
  CUipcMemHandle flag_handle;
  SOFT_CHECK(cuIpcGetEventHandle(&event_handle, event));
  SOFT_CHECK(cuIpcGetMemHandle(&flag_handle, flag));
  char ready;
  if (!write_all(to_reader, &event_handle, sizeof event_handle) ||
      !write_all(to_reader, &flag_handle, sizeof flag_handle) ||
      !read_all(from_reader, &ready, 1)) {
    why = "the reader exited before it was ready (its error is above)";
    return false;
  }
  unsigned long long ns = 20000000ULL;
  std::vector<double> samples;
  for (int i = 0; i < kWarmups + kRepeats; i++) {
    SOFT_CHECK(cuMemsetD32Async(flag, 0, 4, stream));
    void* args[] = {&flag, &ns};
    SOFT_CHECK(cuLaunchKernel(spin_then_flag, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr));
    SOFT_CHECK(cuEventRecord(event, stream));
    uint64_t reply[2];
    if (!write_all(to_reader, "g", 1) || !read_all(from_reader, reply, sizeof reply)) {
      why = "the reader exited mid-round (its error is above)";
      return false;
    }
    SOFT_CHECK(cuStreamSynchronize(stream));
    unsigned int host[4];
    SOFT_CHECK(cuMemcpyDtoH(host, flag, sizeof host));
    if (reply[1] != 1) {
      why = "the reader ran before the writer's flag was set";
      return false;
    }
    uint64_t end = ((uint64_t)host[3] << 32) | host[2];
    if (i >= kWarmups) samples.push_back((double)(int64_t)(reply[0] - end) / 1e3);
  }
  *median_us = median(samples);
  SOFT_CHECK(cuMemFree(flag));
  SOFT_CHECK(cuEventDestroy(event));
  return true;
}

// Runs `ipc_event_wait` and prints its line, or a `_skip` line with the reason.
static void ipc_event_wait(const char* exe, const char* ptx_path, CUfunction spin_then_flag,
                           CUstream stream) {
  int to_reader[2], from_reader[2];
  if (pipe(to_reader) != 0 || pipe(from_reader) != 0) {
    perror("ipc_event_wait: pipe");
    exit(1);
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("ipc_event_wait: fork");
    exit(1);
  }
  if (pid == 0) {
    dup2(to_reader[0], 0);
    dup2(from_reader[1], 1);
    for (int fd : {to_reader[0], to_reader[1], from_reader[0], from_reader[1]}) close(fd);
    execl("/proc/self/exe", exe, "--ipc-reader", ptx_path, static_cast<char*>(nullptr));
    perror("ipc_event_wait: exec");
    _exit(127);
  }
  close(to_reader[0]);
  close(from_reader[1]);
  // A reader gone mid-write must not end this program.
  signal(SIGPIPE, SIG_IGN);
  double median_us = 0;
  std::string why;
  bool ran = run_ipc_rounds(spin_then_flag, stream, to_reader[1], from_reader[0], &median_us, why);
  if (ran && !write_all(to_reader[1], "q", 1)) {
    ran = false;
    why = "the reader exited before the end (its error is above)";
  }
  close(to_reader[1]);
  close(from_reader[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (ran && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
    ran = false;
    why = "the reader failed as it ended (its error is above)";
  }
  if (ran) {
    emit("ipc_event_wait", median_us,
         "GPU time from the writer's kernel end to the reader's kernel start, the reader in "
         "another process waiting on an interprocess event (us of the global timer)");
  } else {
    printf("{\"name\":\"_skip\",\"id\":\"ipc_event_wait\",\"reason\":\"%s\"}\n", why.c_str());
    fflush(stdout);
  }
}

// ---------------------------------------------------------------------------

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s path/to/kernels.ptx\n", argv[0]);
    return 2;
  }
  if (argc == 3 && std::string(argv[1]) == "--ipc-reader") return ipc_reader(argv[2]);

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
  CUfunction spin_then_flag;
  CHECK(cuModuleGetFunction(&spin_then_flag, mod, "spin_then_flag"));

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

  ipc_event_wait(argv[0], argv[1], spin_then_flag, stream);

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
