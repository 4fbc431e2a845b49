// Probe: the seed workload's concurrent iteration in C, step by step (host times from the
// iteration's start, medians of 60 after 300 untimed), to set beside experiments-seed.ts's
// "H" lines. Two streams, one cuBLAS handle each (32 MiB workspace each), SGEMM 1024 then
// sin_inplace from kernels.ptx (argv[1]), then cuStreamSynchronize on both.
//   nvcc -O2 -arch=sm_90 -o /tmp/seed-probe seed-probe.cu -lcublas -lcuda
#include <cublas_v2.h>
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#define CK(x)                                                                    \
  do {                                                                           \
    auto r_ = (x);                                                               \
    if ((int)r_ != 0) {                                                          \
      printf("{\"error\":\"%s\",\"code\":%d}\n", #x, (int)r_);                   \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

static double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: seed-probe kernels.ptx\n");
    return 2;
  }
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  FILE* f = fopen(argv[1], "rb");
  if (!f) return 1;
  std::vector<char> ptx(1 << 20);
  size_t len = fread(ptx.data(), 1, ptx.size() - 1, f);
  fclose(f);
  ptx[len] = 0;
  CUmodule mod;
  CK(cuModuleLoadData(&mod, ptx.data()));
  CUfunction sinK, emptyK;
  CK(cuModuleGetFunction(&sinK, mod, "sin_inplace"));
  CK(cuModuleGetFunction(&emptyK, mod, "empty_kernel"));

  const int n = 1024;
  unsigned long long count = (unsigned long long)n * n;
  size_t bytes = count * 4, wsBytes = 32 << 20;
  CUstream s[2];
  cublasHandle_t h[2];
  CUdeviceptr a[2], b[2], c[2], ws[2];
  for (int j = 0; j < 2; j++) {
    CK(cuStreamCreate(&s[j], CU_STREAM_NON_BLOCKING));
    CK(cublasCreate(&h[j]));
    CK(cublasSetStream(h[j], (cudaStream_t)s[j]));
    CK(cuMemAlloc(&ws[j], wsBytes));
    CK(cublasSetWorkspace(h[j], (void*)ws[j], wsBytes));
    CK(cuMemAlloc(&a[j], bytes));
    CK(cuMemAlloc(&b[j], bytes));
    CK(cuMemAlloc(&c[j], bytes));
    CK(cuMemsetD32(a[j], 0x3c23d70a, count));  // 0.01f
    CK(cuMemsetD32(b[j], 0x3c23d70a, count));
  }
  float alpha = 1, beta = 0;
  void* params[2][2] = {{&c[0], &count}, {&c[1], &count}};
  std::map<std::string, std::vector<double>> steps;
  auto mark = [&](const std::string& k, double v) { steps[k].push_back(v); };

  for (int r = 0; r < 360; r++) {
    CK(cuCtxSynchronize());
    double t0 = now_us(), t[6];
    for (int j = 0; j < 2; j++) {
      cublasSgemm(h[j], CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, (float*)a[j], n, (float*)b[j],
                  n, &beta, (float*)c[j], n);
      t[2 * j] = now_us() - t0;
      CK(cuLaunchKernel(sinK, 4096, 1, 1, 256, 1, 1, 0, s[j], params[j], nullptr));
      t[2 * j + 1] = now_us() - t0;
    }
    CK(cuStreamSynchronize(s[0]));
    t[4] = now_us() - t0;
    CK(cuStreamSynchronize(s[1]));
    t[5] = now_us() - t0;
    if (r >= 300) {
      mark("C concurrent: gemm 1 issued", t[0]);
      mark("C concurrent: sin 1 issued", t[1]);
      mark("C concurrent: gemm 2 issued", t[2]);
      mark("C concurrent: sin 2 issued", t[3]);
      mark("C concurrent: stream 1 synchronized", t[4]);
      mark("C concurrent: both synchronized", t[5]);
    }
  }
  // One stream: the same two jobs, for the serial time.
  for (int r = 0; r < 360; r++) {
    CK(cuCtxSynchronize());
    double t0 = now_us();
    for (int j = 0; j < 2; j++) {
      cublasSgemm(h[0], CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, (float*)a[j], n, (float*)b[j],
                  n, &beta, (float*)c[j], n);
      CK(cuLaunchKernel(sinK, 4096, 1, 1, 256, 1, 1, 0, s[0], params[j], nullptr));
    }
    CK(cuStreamSynchronize(s[0]));
    if (r >= 300) mark("C serial: synchronized", now_us() - t0);
  }
  // Launch issue time right after an SGEMM: sin_inplace (4096 x 256, 2 parameters) against
  // the empty kernel.
  for (int r = 0; r < 360; r++) {
    CK(cuCtxSynchronize());
    cublasSgemm(h[0], CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, (float*)a[0], n, (float*)b[0], n,
                &beta, (float*)c[0], n);
    double t0 = now_us();
    CK(cuLaunchKernel(r % 2 ? sinK : emptyK, r % 2 ? 4096 : 1, 1, 1, r % 2 ? 256 : 1, 1, 1, 0,
                      s[0], r % 2 ? params[0] : nullptr, nullptr));
    double t1 = now_us() - t0;
    if (r >= 300) mark(r % 2 ? "C launch after sgemm: sin_inplace" : "C launch after sgemm: empty", t1);
  }
  // Isolated calls after a blocking synchronize, interleaved (as experiments-gemm.ts does).
  {
    CUdeviceptr a8, b8, c8;
    CK(cuMemAlloc(&a8, 256));
    CK(cuMemAlloc(&b8, 256));
    CK(cuMemAlloc(&c8, 256));
    auto sg = [&]() {
      cublasSgemm(h[0], CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, (float*)a[0], n, (float*)b[0],
                  n, &beta, (float*)c[0], n);
    };
    auto sg8 = [&]() {
      cublasSgemm(h[0], CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &alpha, (float*)a8, 8, (float*)b8, 8,
                  &beta, (float*)c8, 8);
    };
    auto sinL = [&]() { cuLaunchKernel(sinK, 4096, 1, 1, 256, 1, 1, 0, s[0], params[0], nullptr); };
    auto emptyL = [&]() { cuLaunchKernel(emptyK, 1, 1, 1, 1, 1, 1, 0, s[0], nullptr, nullptr); };
    for (int r = 0; r < 400; r++) {
      for (int v = 0; v < 5; v++) {
        CK(cuStreamSynchronize(s[0]));
        if (v == 4) sg();
        double t0 = now_us();
        if (v == 0) sg();
        else if (v == 1) sg8();
        else if (v == 2) sinL();
        else if (v == 3) emptyL();
        else sg();
        double t1 = now_us() - t0;
        static const char* names[] = {"C isolated: sgemm 1024 after sync", "C isolated: sgemm 8 after sync",
                                      "C isolated: launch sin after sync", "C isolated: launch empty after sync",
                                      "C isolated: sgemm 1024 second in a row"};
        if (r >= 100) mark(names[v], t1);
      }
    }
  }
  for (auto& [k, v] : steps) {
    std::sort(v.begin(), v.end());
    printf("{\"name\":\"%s\",\"us\":%.1f,\"n\":%zu}\n", k.c_str(), v[v.size() / 2], v.size());
  }
  return 0;
}
