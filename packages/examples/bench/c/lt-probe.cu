// Probe: host issue time of cublasSgemm against cublasLtMatmul with an algorithm chosen once
// (heuristic cached), for 8^3 and 1024^3 float32, on one stream. Prints JSON lines.
//   nvcc -O2 -o /tmp/lt-probe lt-probe.cu -lcublasLt -lcublas -lcuda
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <algorithm>
#include <initializer_list>
#include <chrono>
#include <cstdio>
#include <vector>

#define CK(x) do { auto r_ = (x); if ((int)r_ != 0) { printf("{\"error\":\"%s\",\"code\":%d}\n", #x, (int)r_); return 1; } } while (0)
static double now_us() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int main() {
  CK(cuInit(0)); CUdevice dev; CK(cuDeviceGet(&dev, 0)); CUcontext ctx; CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
  CUstream s; CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  cublasHandle_t h; CK(cublasCreate(&h)); CK(cublasSetStream(h, (cudaStream_t)s));
  cublasLtHandle_t lt; CK(cublasLtCreate(&lt));
  printf("{\"enum\":{\"TRANSA\":%d,\"TRANSB\":%d,\"PREF_MAX_WS\":%d,\"COMPUTE_32F\":%d,\"COMPUTE_32F_FAST_TF32\":%d,\"COMPUTE_64F\":%d,\"heuristic_size\":%zu,\"algo_size\":%zu}}\n",
         (int)CUBLASLT_MATMUL_DESC_TRANSA, (int)CUBLASLT_MATMUL_DESC_TRANSB, (int)CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
         (int)CUBLAS_COMPUTE_32F, (int)CUBLAS_COMPUTE_32F_FAST_TF32, (int)CUBLAS_COMPUTE_64F, sizeof(cublasLtMatmulHeuristicResult_t), sizeof(cublasLtMatmulAlgo_t));
  size_t wsBytes = 32 << 20; CUdeviceptr ws; CK(cuMemAlloc(&ws, wsBytes));
  CK(cublasSetWorkspace(h, (void*)ws, wsBytes));
  for (int n : {8, 1024}) {
    CUdeviceptr a, b, c; size_t bytes = (size_t)n * n * 4;
    CK(cuMemAlloc(&a, bytes)); CK(cuMemAlloc(&b, bytes)); CK(cuMemAlloc(&c, bytes));
    CK(cuMemsetD8(a, 0, bytes)); CK(cuMemsetD8(b, 0, bytes)); CK(cuMemsetD8(c, 0, bytes));
    float alpha = 1, beta = 0;
    cublasLtMatmulDesc_t desc; CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t op = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof op));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op, sizeof op));
    cublasLtMatrixLayout_t la, lb, lc;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, n, n, n)); CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, n, n, n)); CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n, n, n));
    cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsBytes, sizeof wsBytes));
    cublasLtMatmulHeuristicResult_t result; int count = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &result, &count));
    if (count == 0) { printf("{\"error\":\"no algo\"}\n"); return 1; }
    auto time = [&](const char* name, auto call) {
      std::vector<double> v;
      int calls = n == 8 ? 10000 : 20;
      for (int r = 0; r < 18; r++) {
        double t0 = now_us();
        for (int i = 0; i < calls; i++) call();
        double t = (now_us() - t0) / calls;
        cuStreamSynchronize(s);
        if (r >= 3) v.push_back(t);
      }
      std::sort(v.begin(), v.end());
      printf("{\"name\":\"%s\",\"n\":%d,\"issue_us\":%.3f}\n", name, n, v[v.size() / 2]);
    };
    time("cublasSgemm", [&] { cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, (float*)a, n, (float*)b, n, &beta, (float*)c, n); });
    time("cublasLtMatmul cached algo", [&] { cublasLtMatmul(lt, desc, &alpha, (void*)a, la, (void*)b, lb, &beta, (void*)c, lc, (void*)c, lc, &result.algo, (void*)ws, wsBytes, (cudaStream_t)s); });
    time("cublasLtMatmul algo=NULL", [&] { cublasLtMatmul(lt, desc, &alpha, (void*)a, la, (void*)b, lb, &beta, (void*)c, lc, (void*)c, lc, nullptr, (void*)ws, wsBytes, (cudaStream_t)s); });
    // Single-call latency with an idle stream, as the seed's first GEMM sees it.
    for (int k = 0; k < 2; k++) {
      std::vector<double> v;
      for (int r = 0; r < 50; r++) {
        cuStreamSynchronize(s);
        double t0 = now_us();
        if (k == 0) cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, (float*)a, n, (float*)b, n, &beta, (float*)c, n);
        else cublasLtMatmul(lt, desc, &alpha, (void*)a, la, (void*)b, lb, &beta, (void*)c, lc, (void*)c, lc, &result.algo, (void*)ws, wsBytes, (cudaStream_t)s);
        v.push_back(now_us() - t0);
      }
      std::sort(v.begin(), v.end());
      printf("{\"name\":\"single call, idle stream: %s\",\"n\":%d,\"issue_us\":%.3f}\n", k == 0 ? "cublasSgemm" : "cublasLtMatmul cached", n, v[v.size() / 2]);
    }
  }
  return 0;
}
