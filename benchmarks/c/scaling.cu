// Concurrency scaling, the C side: K independent jobs started together, for each job shape and
// each K, in the two ways a C program runs them:
//
//   c_threads  K POSIX threads (a pool created once, woken by a semaphore each), each with its
//              own non-blocking stream, cuBLAS handle and cuRAND generator; a synchronize point
//              of the job is cuStreamSynchronize on the thread's stream (a C++ service's way).
//   c_polling  one thread issuing round-robin to K streams: each job issues up to its next
//              synchronize point, then the thread polls the streams with cuStreamQuery and
//              issues the next part of every job whose stream is idle (an event loop's way).
//
// Host code only: the driver API for streams and kernels (axpb_f32 from kernels.ptx), cuBLAS
// for SGEMM, cuRAND's host API for the uniform fill. The job shapes are described in
// ../README.md ("Concurrency scaling"); their sizes come on the command line from src/run.ts,
// so that ours, C and the Python peers run the same jobs.
//
//   build: ./build.sh [OUT_DIR]
//   run:   OUT_DIR/scaling path/to/kernels.ptx ks=1,2,4 shapes=latency,mixed,control ...
//
// Output: one JSON object per line:
//   {"name":"scaling","system":"c_threads","shape":"latency","k":4,"mode":"concurrent",
//    "jobs":4,"seconds":[...]}
// "seconds" holds the wall time of every timed batch (a batch is K jobs started together, or
// for mode "serial" `serial_jobs` jobs one after another on one stream).

#include <cublas_v2.h>
#include <cuda.h>
#include <curand.h>
#include <pthread.h>
#include <semaphore.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

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

#define CHECK_CURAND(call)                                                                 \
  do {                                                                                     \
    curandStatus_t s_ = (call);                                                            \
    if (s_ != CURAND_STATUS_SUCCESS) {                                                     \
      fprintf(stderr, "%s:%d: %s failed: curandStatus %d\n", __FILE__, __LINE__, #call,    \
              (int)s_);                                                                    \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

#define CHECK_POSIX(call)                                                                  \
  do {                                                                                     \
    if ((call) != 0) {                                                                     \
      perror(#call);                                                                       \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

// ---------------------------------------------------------------------------
// Configuration (key=value arguments; the defaults are those of src/run.ts)

struct Config {
  std::vector<int> ks{1, 2, 4, 8, 16, 32, 64};
  std::vector<std::string> shapes{"latency", "mixed", "control"};
  std::vector<std::string> systems{"c_threads", "c_polling"};
  int warmups = 2;           // untimed batches per (shape, K)
  int min_samples = 9;       // timed batches per (shape, K) at least ...
  int sample_jobs = 512;     // ... and at least sample_jobs / K of them
  int serial_jobs = 8;       // jobs per serial batch
  int latency_steps = 20;    // latency-bound: axpb steps
  int latency_sync_every = 5;
  long long latency_n = 65536;
  int mixed_steps = 10;      // mixed: (uniform fill, SGEMM, axpb) steps
  int mixed_n = 256;
  int control_steps = 4;     // GPU-filling control: SGEMM steps
  int control_n = 2048;
  unsigned long long seed = 1000;  // job slot i's generator: seed + i
};

static std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) parts.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

static long long parse_integer(const std::string& key, const std::string& value) {
  char* end = nullptr;
  long long number = strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || number < 0) {
    fprintf(stderr, "scaling: %s must be a non-negative integer, got '%s'\n", key.c_str(),
            value.c_str());
    exit(2);
  }
  return number;
}

static Config parse_config(int argc, char** argv) {
  Config config;
  for (int i = 2; i < argc; i++) {
    std::string argument = argv[i];
    size_t equals = argument.find('=');
    if (equals == std::string::npos) {
      fprintf(stderr, "scaling: expected key=value, got '%s'\n", argv[i]);
      exit(2);
    }
    std::string key = argument.substr(0, equals), value = argument.substr(equals + 1);
    if (key == "ks") {
      config.ks.clear();
      for (const std::string& k : split(value)) config.ks.push_back((int)parse_integer(key, k));
    } else if (key == "shapes") {
      config.shapes = split(value);
    } else if (key == "systems") {
      config.systems = split(value);
    } else if (key == "warmups") {
      config.warmups = (int)parse_integer(key, value);
    } else if (key == "min_samples") {
      config.min_samples = (int)parse_integer(key, value);
    } else if (key == "sample_jobs") {
      config.sample_jobs = (int)parse_integer(key, value);
    } else if (key == "serial_jobs") {
      config.serial_jobs = (int)parse_integer(key, value);
    } else if (key == "latency_steps") {
      config.latency_steps = (int)parse_integer(key, value);
    } else if (key == "latency_sync_every") {
      config.latency_sync_every = (int)parse_integer(key, value);
    } else if (key == "latency_n") {
      config.latency_n = parse_integer(key, value);
    } else if (key == "mixed_steps") {
      config.mixed_steps = (int)parse_integer(key, value);
    } else if (key == "mixed_n") {
      config.mixed_n = (int)parse_integer(key, value);
    } else if (key == "control_steps") {
      config.control_steps = (int)parse_integer(key, value);
    } else if (key == "control_n") {
      config.control_n = (int)parse_integer(key, value);
    } else if (key == "seed") {
      config.seed = (unsigned long long)parse_integer(key, value);
    } else {
      // Unknown keys are ignored: a newer run.ts may pass settings an older binary lacks.
      fprintf(stderr, "scaling: ignoring unknown setting '%s'\n", key.c_str());
    }
  }
  if (config.ks.empty() || config.latency_sync_every < 1 || config.min_samples < 1) {
    fprintf(stderr, "scaling: ks must be non-empty; latency_sync_every, min_samples >= 1\n");
    exit(2);
  }
  for (const std::string& shape : config.shapes) {
    if (shape != "latency" && shape != "mixed" && shape != "control") {
      fprintf(stderr, "scaling: unknown shape '%s'\n", shape.c_str());
      exit(2);
    }
  }
  return config;
}

// ---------------------------------------------------------------------------
// Shared state

static double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

static CUcontext g_context;
static CUfunction g_axpb;
static Config g_config;

enum Shape { LATENCY = 0, MIXED = 1, CONTROL = 2 };

static Shape shape_of(const std::string& name) {
  return name == "latency" ? LATENCY : name == "mixed" ? MIXED : CONTROL;
}

// Everything one job slot owns: its stream, library handles and buffers (for every shape).
struct Slot {
  CUstream stream;
  cublasHandle_t cublas;
  curandGenerator_t curand;
  CUdeviceptr latency_x, latency_y;                // latency_n floats each
  CUdeviceptr mixed_a, mixed_b, mixed_c;           // mixed_n^2 floats each
  CUdeviceptr control_a, control_b, control_c;     // control_n^2 floats each
};

static std::vector<Slot> g_slots;

static CUdeviceptr alloc_floats(size_t count) {
  CUdeviceptr pointer;
  CHECK(cuMemAlloc(&pointer, count * sizeof(float)));
  return pointer;
}

static void setup_slot(Slot& slot, unsigned long long seed) {
  CHECK(cuStreamCreate(&slot.stream, CU_STREAM_NON_BLOCKING));
  CHECK_CUBLAS(cublasCreate(&slot.cublas));
  CHECK_CUBLAS(cublasSetStream(slot.cublas, (cudaStream_t)slot.stream));
  CHECK_CUBLAS(cublasSetPointerMode(slot.cublas, CUBLAS_POINTER_MODE_HOST));
  CHECK_CUBLAS(cublasSetMathMode(slot.cublas, CUBLAS_DEFAULT_MATH));  // plain FP32, no TF32
  CHECK_CURAND(curandCreateGenerator(&slot.curand, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  CHECK_CURAND(curandSetPseudoRandomGeneratorSeed(slot.curand, seed));
  CHECK_CURAND(curandSetStream(slot.curand, (cudaStream_t)slot.stream));
  const Config& c = g_config;
  const size_t mixed = (size_t)c.mixed_n * c.mixed_n;
  const size_t control = (size_t)c.control_n * c.control_n;
  slot.latency_x = alloc_floats(c.latency_n);
  slot.latency_y = alloc_floats(c.latency_n);
  slot.mixed_a = alloc_floats(mixed);
  slot.mixed_b = alloc_floats(mixed);
  slot.mixed_c = alloc_floats(mixed);
  slot.control_a = alloc_floats(control);
  slot.control_b = alloc_floats(control);
  slot.control_c = alloc_floats(control);
  // Inputs uniform in (0, 1], from the slot's own generator.
  for (CUdeviceptr p : {slot.latency_x, slot.latency_y})
    CHECK_CURAND(curandGenerateUniform(slot.curand, (float*)p, c.latency_n));
  for (CUdeviceptr p : {slot.mixed_a, slot.mixed_b, slot.mixed_c})
    CHECK_CURAND(curandGenerateUniform(slot.curand, (float*)p, mixed));
  for (CUdeviceptr p : {slot.control_a, slot.control_b, slot.control_c})
    CHECK_CURAND(curandGenerateUniform(slot.curand, (float*)p, control));
  CHECK(cuStreamSynchronize(slot.stream));
}

static void destroy_slot(Slot& slot) {
  for (CUdeviceptr p : {slot.latency_x, slot.latency_y, slot.mixed_a, slot.mixed_b, slot.mixed_c,
                        slot.control_a, slot.control_b, slot.control_c})
    CHECK(cuMemFree(p));
  CHECK_CURAND(curandDestroyGenerator(slot.curand));
  CHECK_CUBLAS(cublasDestroy(slot.cublas));
  CHECK(cuStreamDestroy(slot.stream));
}

// ---------------------------------------------------------------------------
// The jobs, as segments: the work between two synchronize points.

// y = a x + b over n floats: axpb_f32 from kernels.ptx, 256 threads a block, one element each.
static void axpb(CUstream stream, CUdeviceptr y, CUdeviceptr x, float a, float b,
                 unsigned long long n) {
  void* params[] = {&y, &x, &a, &b, &n};
  const unsigned block = 256, grid = (unsigned)((n + block - 1) / block);
  CHECK(cuLaunchKernel(g_axpb, grid, 1, 1, block, 1, 1, 0, stream, params, nullptr));
}

// C = A B, n x n column-major floats.
static void sgemm(cublasHandle_t handle, int n, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) {
  const float alpha = 1.0f, beta = 0.0f;
  CHECK_CUBLAS(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, (const float*)a,
                           n, (const float*)b, n, &beta, (float*)c, n));
}

static int segments_of(Shape shape) {
  const Config& c = g_config;
  if (shape == LATENCY) return (c.latency_steps + c.latency_sync_every - 1) / c.latency_sync_every;
  return 1;
}

// Issues segment `segment` of a job of `shape` on the slot's stream (no synchronize).
static void issue_segment(Slot& slot, Shape shape, int segment) {
  const Config& c = g_config;
  if (shape == LATENCY) {
    // Steps alternate y = 0.5 x + 1 and x = 0.5 y + 1 (a dependent chain, values bounded).
    const int first = segment * c.latency_sync_every;
    const int last = std::min(c.latency_steps, first + c.latency_sync_every);
    for (int step = first; step < last; step++) {
      if (step % 2 == 0)
        axpb(slot.stream, slot.latency_y, slot.latency_x, 0.5f, 1.0f, c.latency_n);
      else
        axpb(slot.stream, slot.latency_x, slot.latency_y, 0.5f, 1.0f, c.latency_n);
    }
  } else if (shape == MIXED) {
    // A = uniform; C = A B; B = C / n (so the values stay bounded step after step).
    const size_t count = (size_t)c.mixed_n * c.mixed_n;
    for (int step = 0; step < c.mixed_steps; step++) {
      CHECK_CURAND(curandGenerateUniform(slot.curand, (float*)slot.mixed_a, count));
      sgemm(slot.cublas, c.mixed_n, slot.mixed_a, slot.mixed_b, slot.mixed_c);
      axpb(slot.stream, slot.mixed_b, slot.mixed_c, 1.0f / c.mixed_n, 0.0f, count);
    }
  } else {
    for (int step = 0; step < c.control_steps; step++)
      sgemm(slot.cublas, c.control_n, slot.control_a, slot.control_b, slot.control_c);
  }
}

// cuStreamQuery answers CUDA_ERROR_NOT_READY for a busy stream: not an error.
static bool stream_done(CUstream stream) {
  CUresult r = cuStreamQuery(stream);
  if (r == CUDA_ERROR_NOT_READY) return false;
  CHECK(r);
  return true;
}

// One whole job on the calling thread: each segment, then cuStreamSynchronize.
static void run_job_blocking(Slot& slot, Shape shape) {
  const int segments = segments_of(shape);
  for (int segment = 0; segment < segments; segment++) {
    issue_segment(slot, shape, segment);
    CHECK(cuStreamSynchronize(slot.stream));
  }
}

// One whole job, each synchronize point a busy loop on cuStreamQuery.
static void run_job_polling(Slot& slot, Shape shape) {
  const int segments = segments_of(shape);
  for (int segment = 0; segment < segments; segment++) {
    issue_segment(slot, shape, segment);
    while (!stream_done(slot.stream)) {
    }
  }
}

// ---------------------------------------------------------------------------
// c_threads: a pool of POSIX threads, one per slot, each woken by its own semaphore.

struct Pool {
  std::vector<pthread_t> threads;
  std::vector<sem_t> start;      // one per worker
  sem_t done;                    // posted by the last worker of a batch
  std::atomic<int> remaining{0};
  Shape shape = LATENCY;         // the batch's shape (written before the workers are woken)
  bool quit = false;
};

static Pool g_pool;

static void* worker(void* argument) {
  const size_t index = (size_t)argument;
  CHECK(cuCtxSetCurrent(g_context));
  for (;;) {
    while (sem_wait(&g_pool.start[index]) != 0) {
    }
    if (g_pool.quit) break;
    run_job_blocking(g_slots[index], g_pool.shape);
    if (g_pool.remaining.fetch_sub(1) == 1) CHECK_POSIX(sem_post(&g_pool.done));
  }
  return nullptr;
}

static void start_pool(size_t workers) {
  g_pool.threads.resize(workers);
  g_pool.start.resize(workers);
  CHECK_POSIX(sem_init(&g_pool.done, 0, 0));
  for (size_t i = 0; i < workers; i++) {
    CHECK_POSIX(sem_init(&g_pool.start[i], 0, 0));
    CHECK_POSIX(pthread_create(&g_pool.threads[i], nullptr, worker, (void*)i));
  }
}

static void stop_pool() {
  g_pool.quit = true;
  for (size_t i = 0; i < g_pool.threads.size(); i++) CHECK_POSIX(sem_post(&g_pool.start[i]));
  for (pthread_t thread : g_pool.threads) CHECK_POSIX(pthread_join(thread, nullptr));
  for (sem_t& semaphore : g_pool.start) sem_destroy(&semaphore);
  sem_destroy(&g_pool.done);
}

// K jobs on K threads, started together; returns the wall time until the last one is done.
static double batch_threads(Shape shape, int k) {
  g_pool.shape = shape;
  g_pool.remaining.store(k);
  const double t0 = now_s();
  for (int i = 0; i < k; i++) CHECK_POSIX(sem_post(&g_pool.start[i]));
  while (sem_wait(&g_pool.done) != 0) {
  }
  return now_s() - t0;
}

// K jobs from this thread, round-robin over K streams, polling with cuStreamQuery.
static double batch_polling(Shape shape, int k) {
  const int segments = segments_of(shape);
  std::vector<int> next(k, 1);  // the next segment to issue, per job
  const double t0 = now_s();
  for (int i = 0; i < k; i++) issue_segment(g_slots[i], shape, 0);
  int running = k;
  while (running > 0) {
    for (int i = 0; i < k; i++) {
      if (next[i] > segments || !stream_done(g_slots[i].stream)) continue;
      if (next[i] == segments) {
        running--;
      } else {
        issue_segment(g_slots[i], shape, next[i]);
      }
      next[i]++;
    }
  }
  return now_s() - t0;
}

// `serial_jobs` jobs one after another on slot 0's stream, from this thread.
static double batch_serial(Shape shape, bool polling) {
  const double t0 = now_s();
  for (int j = 0; j < g_config.serial_jobs; j++) {
    if (polling)
      run_job_polling(g_slots[0], shape);
    else
      run_job_blocking(g_slots[0], shape);
  }
  return now_s() - t0;
}

// One result line: `jobs` jobs per batch (K, or serial_jobs for a serial batch).
static void emit(const char* system, const std::string& shape, int k, const char* mode, int jobs,
                 const std::vector<double>& seconds) {
  printf("{\"name\":\"scaling\",\"system\":\"%s\",\"shape\":\"%s\",\"k\":%d,\"mode\":\"%s\","
         "\"jobs\":%d,\"seconds\":[",
         system, shape.c_str(), k, mode, jobs);
  for (size_t i = 0; i < seconds.size(); i++) printf("%s%.9g", i ? "," : "", seconds[i]);
  printf("]}\n");
  fflush(stdout);
}

template <class Batch>
static std::vector<double> measure(int samples, Batch batch) {
  for (int i = 0; i < g_config.warmups; i++) batch();
  std::vector<double> seconds;
  for (int i = 0; i < samples; i++) seconds.push_back(batch());
  return seconds;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s path/to/kernels.ptx [key=value ...]\n", argv[0]);
    return 2;
  }
  g_config = parse_config(argc, argv);
  const Config& config = g_config;

  CHECK(cuInit(0));
  CUdevice device;
  CHECK(cuDeviceGet(&device, 0));
  CHECK(cuDevicePrimaryCtxRetain(&g_context, device));
  CHECK(cuCtxSetCurrent(g_context));

  FILE* file = fopen(argv[1], "rb");
  if (!file) {
    fprintf(stderr, "cannot open %s\n", argv[1]);
    return 1;
  }
  std::string ptx;
  char buffer[65536];
  size_t read;
  while ((read = fread(buffer, 1, sizeof buffer, file)) > 0) ptx.append(buffer, read);
  fclose(file);
  CUmodule module;
  CHECK(cuModuleLoadData(&module, ptx.c_str()));
  CHECK(cuModuleGetFunction(&g_axpb, module, "axpb_f32"));

  const int max_k = *std::max_element(config.ks.begin(), config.ks.end());
  g_slots.resize(std::max(1, max_k));
  for (size_t i = 0; i < g_slots.size(); i++) setup_slot(g_slots[i], config.seed + i);

  const bool threads = std::find(config.systems.begin(), config.systems.end(), "c_threads") !=
                       config.systems.end();
  const bool polling = std::find(config.systems.begin(), config.systems.end(), "c_polling") !=
                       config.systems.end();
  if (threads) start_pool(g_slots.size());

  for (const std::string& name : config.shapes) {
    const Shape shape = shape_of(name);
    if (threads) {
      emit("c_threads", name, 1, "serial", config.serial_jobs,
           measure(config.min_samples, [&] { return batch_serial(shape, false); }));
    }
    if (polling) {
      emit("c_polling", name, 1, "serial", config.serial_jobs,
           measure(config.min_samples, [&] { return batch_serial(shape, true); }));
    }
    for (int k : config.ks) {
      const int samples = std::max(config.min_samples, (config.sample_jobs + k - 1) / k);
      if (threads) {
        emit("c_threads", name, k, "concurrent", k,
             measure(samples, [&] { return batch_threads(shape, k); }));
      }
      if (polling) {
        emit("c_polling", name, k, "concurrent", k,
             measure(samples, [&] { return batch_polling(shape, k); }));
      }
    }
  }

  if (threads) stop_pool();
  char device_name[256];
  CHECK(cuDeviceGetName(device_name, sizeof device_name, device));
  int driver;
  CHECK(cuDriverGetVersion(&driver));
  printf("{\"name\":\"_meta\",\"system\":\"c\",\"device\":\"%s\",\"driver\":%d}\n", device_name,
         driver);
  for (Slot& slot : g_slots) destroy_slot(slot);
  CHECK(cuModuleUnload(module));
  CHECK(cuDevicePrimaryCtxRelease(device));
  return 0;
}
