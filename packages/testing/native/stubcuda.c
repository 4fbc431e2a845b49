/*
 * A stand-in for libcuda for `pnpm bench:host` (src/host.ts): every function our packages bind
 * returns CUDA_SUCCESS at once, after writing plausible values to its outputs (one device of
 * compute capability 9.0, handles that count up, device addresses from a bump counter, host
 * memory from calloc). Streams and events are always complete. It does no GPU work: it exists
 * so that the host cost of our own code can be measured against the bare koffi call of the same
 * function on a machine without a GPU. It is a test double, loaded only through
 * CUDA_TASKS_LIBCUDA by the host benchmark and by tests; no package uses it.
 *
 * Every function is declared with STAND_IN (empty unless defined): cpucuda.c builds it with
 * STAND_IN=__attribute__((weak)) and overrides the memory, module and launch functions with
 * ones that do the work on the CPU.
 *
 * Build: cc -O2 -shared -fPIC -o libstubcuda.so stubcuda.c
 */
#include <stdlib.h>
#include <string.h>

#ifndef STAND_IN
#define STAND_IN
#endif

typedef unsigned long long u64;

static u64 next_handle = 0x10000;
static u64 next_address = 0x7f0000000000ULL;
static void *current_context = 0;

/* Writes a fresh non-zero handle to an output parameter. */
#define NEW_HANDLE(out) (*(u64 *)(out) = (next_handle += 0x100))

STAND_IN int cuInit(unsigned flags) { return 0; }
STAND_IN int cuDriverGetVersion(int *version) { *version = 13000; return 0; }
STAND_IN int cuGetErrorName(int error, const char **name) { *name = "CUDA_ERROR_STAND_IN"; return 0; }
STAND_IN int cuGetErrorString(int error, const char **text) { *text = "stand-in libcuda"; return 0; }
STAND_IN int cuDeviceGet(int *device, int ordinal) { *device = ordinal; return 0; }
STAND_IN int cuDeviceGetCount(int *count) { *count = 1; return 0; }
STAND_IN int cuDeviceGetName(char *name, int length, int device) {
  strncpy(name, "stand-in GPU", (size_t)length);
  return 0;
}
STAND_IN int cuDeviceGetAttribute(int *value, int attribute, int device) {
  switch (attribute) {
    case 1: case 2: case 3: *value = 1024; break;      /* max threads per block, block x, y */
    case 4: *value = 64; break;                        /* block z */
    case 5: *value = 2147483647; break;                /* grid x */
    case 6: case 7: *value = 65535; break;             /* grid y, z */
    case 8: *value = 49152; break;                     /* shared memory per block */
    case 10: *value = 32; break;                       /* warp size */
    case 16: *value = 132; break;                      /* multiprocessors */
    case 75: *value = 9; break;                        /* compute capability major */
    case 76: *value = 0; break;                        /* minor */
    case 97: *value = 232448; break;                   /* shared memory per block, opt-in */
    default: *value = 1;
  }
  return 0;
}
STAND_IN int cuDeviceTotalMem_v2(size_t *bytes, int device) { *bytes = 80ULL << 30; return 0; }
STAND_IN int cuDeviceGetUuid_v2(char *uuid, int device) { memset(uuid, 0, 16); return 0; }
STAND_IN int cuDeviceGetUuid(char *uuid, int device) { memset(uuid, 0, 16); return 0; }
STAND_IN int cuDeviceCanAccessPeer(int *can, int device, int peer) { *can = 0; return 0; }
STAND_IN int cuDeviceGetDefaultMemPool(void **pool, int device) { NEW_HANDLE(pool); return 0; }
STAND_IN int cuDevicePrimaryCtxRetain(void **context, int device) { *(u64 *)context = 0x2000; return 0; }
STAND_IN int cuDevicePrimaryCtxRelease_v2(int device) { return 0; }
STAND_IN int cuCtxSetCurrent(void *context) { current_context = context; return 0; }
STAND_IN int cuCtxGetCurrent(void **context) { *context = current_context; return 0; }
STAND_IN int cuCtxSynchronize(void) { return 0; }
STAND_IN int cuCtxSynchronize_v2(void) { return 0; }
STAND_IN int cuCtxGetStreamPriorityRange(int *least, int *greatest) { *least = 0; *greatest = -5; return 0; }
STAND_IN int cuCtxEnablePeerAccess(void *context, unsigned flags) { return 0; }
STAND_IN int cuMemGetInfo_v2(size_t *free, size_t *total) {
  *free = 70ULL << 30;
  *total = 80ULL << 30;
  return 0;
}
STAND_IN int cuStreamCreateWithPriority(void **stream, unsigned flags, int priority) { NEW_HANDLE(stream); return 0; }
STAND_IN int cuStreamDestroy_v2(void *stream) { return 0; }
STAND_IN int cuStreamQuery(void *stream) { return 0; }
STAND_IN int cuStreamSynchronize(void *stream) { return 0; }
STAND_IN int cuStreamWaitEvent(void *stream, void *event, unsigned flags) { return 0; }
STAND_IN int cuStreamGetPriority(void *stream, int *priority) { *priority = 0; return 0; }
STAND_IN int cuStreamGetFlags(void *stream, unsigned *flags) { *flags = 1; return 0; }
STAND_IN int cuEventCreate(void **event, unsigned flags) { NEW_HANDLE(event); return 0; }
STAND_IN int cuEventDestroy_v2(void *event) { return 0; }
STAND_IN int cuEventRecord(void *event, void *stream) { return 0; }
STAND_IN int cuEventQuery(void *event) { return 0; }
STAND_IN int cuEventSynchronize(void *event) { return 0; }
STAND_IN int cuEventElapsedTime_v2(float *ms, void *start, void *end) { *ms = 0; return 0; }
STAND_IN int cuEventElapsedTime(float *ms, void *start, void *end) { *ms = 0; return 0; }
STAND_IN int cuMemAllocAsync(u64 *address, size_t bytes, void *stream) {
  *address = next_address;
  next_address += (bytes + 511) & ~511ULL;
  if (bytes == 0) next_address += 512;
  return 0;
}
STAND_IN int cuMemFreeAsync(u64 address, void *stream) { return 0; }
STAND_IN int cuMemPoolSetAttribute(void *pool, int attribute, void *value) { return 0; }
STAND_IN int cuMemPoolGetAttribute(void *pool, int attribute, void *value) { *(u64 *)value = 0; return 0; }
STAND_IN int cuMemPoolTrimTo(void *pool, size_t keep) { return 0; }
STAND_IN int cuMemHostAlloc(void **pointer, size_t bytes, unsigned flags) {
  *pointer = calloc(1, bytes ? bytes : 1);
  return *pointer ? 0 : 2; /* CUDA_ERROR_OUT_OF_MEMORY */
}
STAND_IN int cuMemFreeHost(void *pointer) { free(pointer); return 0; }
STAND_IN int cuMemHostRegister_v2(void *pointer, size_t bytes, unsigned flags) { return 0; }
STAND_IN int cuMemHostUnregister(void *pointer) { return 0; }
STAND_IN int cuMemHostGetDevicePointer_v2(u64 *device, void *pointer, unsigned flags) {
  *device = (u64)(size_t)pointer;
  return 0;
}
STAND_IN int cuMemAlloc_v2(u64 *address, size_t bytes) { *address = (next_address += 0x100000); return 0; }
STAND_IN int cuMemFree_v2(u64 address) { return 0; }
STAND_IN int cuPointerSetAttribute(const void *value, int attribute, u64 address) { return 0; }
STAND_IN int cuMemGetAddressRange_v2(u64 *base, size_t *size, u64 address) {
  *base = address;
  *size = 0;
  return 0;
}
STAND_IN int cuDeviceGetPCIBusId(char *bus, int length, int device) {
  strncpy(bus, "0000:00:00.0", (size_t)length);
  return 0;
}
typedef struct { unsigned char reserved[64]; } ipc_handle;
STAND_IN int cuIpcGetMemHandle(ipc_handle *handle, u64 address) { memset(handle, 0, 64); return 0; }
STAND_IN int cuIpcOpenMemHandle_v2(u64 *address, ipc_handle handle, unsigned flags) {
  *address = (next_address += 0x100000);
  return 0;
}
STAND_IN int cuIpcCloseMemHandle(u64 address) { return 0; }
STAND_IN int cuIpcGetEventHandle(ipc_handle *handle, void *event) { memset(handle, 0, 64); return 0; }
STAND_IN int cuIpcOpenEventHandle(void **event, ipc_handle handle) { NEW_HANDLE(event); return 0; }
STAND_IN int cuMemcpyHtoDAsync_v2(u64 device, const void *host, size_t bytes, void *stream) { return 0; }
STAND_IN int cuMemcpyDtoHAsync_v2(void *host, u64 device, size_t bytes, void *stream) {
  memset(host, 0, bytes); /* the stand-in's device memory reads as zeros */
  return 0;
}
STAND_IN int cuMemcpyDtoDAsync_v2(u64 to, u64 from, size_t bytes, void *stream) { return 0; }
STAND_IN int cuMemcpyPeerAsync() { return 0; }
STAND_IN int cuMemcpy2DAsync_v2(const void *copy, void *stream) { return 0; }
STAND_IN int cuMemsetD8Async() { return 0; }
STAND_IN int cuMemsetD16Async() { return 0; }
STAND_IN int cuMemsetD32Async() { return 0; }
STAND_IN int cuModuleLoadData(void **module, const void *image) { NEW_HANDLE(module); return 0; }
STAND_IN int cuModuleLoadDataEx(void **module, const void *image, unsigned n, void *options, void *values) {
  NEW_HANDLE(module);
  return 0;
}
STAND_IN int cuModuleUnload(void *module) { return 0; }
STAND_IN int cuModuleGetFunction(void **function, void *module, const char *name) { NEW_HANDLE(function); return 0; }
STAND_IN int cuFuncGetAttribute(int *value, int attribute, void *function) {
  *value = attribute == 0 ? 1024 : attribute == 4 ? 32 : 0; /* max threads per block, registers */
  return 0;
}
STAND_IN int cuLaunchKernel() { return 0; }
STAND_IN int cuLaunchKernelEx(const void *config, void *function, void **parameters, void **extra) { return 0; }
STAND_IN int cuOccupancyMaxPotentialBlockSize(int *grid, int *block, void *function, void *sizeOf, size_t dynamic, int limit) {
  *grid = 264;
  *block = 1024;
  return 0;
}
STAND_IN int cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, void *function, int block, size_t dynamic) {
  *blocks = 2;
  return 0;
}
STAND_IN int cuStreamBeginCapture_v2() { return 0; }
STAND_IN int cuStreamEndCapture(void *stream, void **graph) { NEW_HANDLE(graph); return 0; }
STAND_IN int cuStreamIsCapturing(void *stream, int *status) { *status = 0; return 0; }
STAND_IN int cuStreamGetCaptureInfo_v3() { return 0; }
STAND_IN int cuGraphInstantiateWithFlags(void **exec, void *graph, u64 flags) { NEW_HANDLE(exec); return 0; }
STAND_IN int cuGraphUpload() { return 0; }
STAND_IN int cuGraphLaunch() { return 0; }
STAND_IN int cuGraphExecUpdate_v2() { return 0; }
STAND_IN int cuGraphGetNodes(void *graph, void **nodes, size_t *count) { *count = 0; return 0; }
STAND_IN int cuGraphDestroy() { return 0; }
STAND_IN int cuGraphExecDestroy() { return 0; }
STAND_IN int cuDeviceGraphMemTrim() { return 0; }
