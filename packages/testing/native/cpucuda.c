/*
 * A libcuda for tests that runs kernels on the CPU: stubcuda.c's functions (built beside this
 * file with STAND_IN=__attribute__((weak))) with the memory, module and launch functions
 * overridden. Device memory is host memory (an address is the host pointer), copies and memsets
 * happen at the call, and a launch runs the kernel to its end before it returns (streams and
 * events stay always complete, as in the stand-in). Modules are the shared libraries that
 * cpunvrtc.c builds from CUDA C with cuda-on-cpu.h: an image is "cpu-cuda module\n", the
 * library's size (8 bytes) and its bytes (loaded through a file removed at once), and a kernel
 * is the module's `ct_cpu_launch_<name>` function.
 *
 * A test double, loaded only through CUDA_TASKS_LIBCUDA by tests (packages/testing's
 * cpu-cuda.ts builds it); no package uses it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef unsigned long long u64;

enum {
  SUCCESS = 0,
  INVALID_VALUE = 1,
  OUT_OF_MEMORY = 2,
  INVALID_IMAGE = 200,
  NOT_FOUND = 500,
  LAUNCH_FAILED = 719,
};

/* A module's kernel: runs the grid to its end; 0, or why not. */
typedef int (*launcher)(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, void **parameters);

/* Live allocations, for cuMemGetAddressRange (few in a test: a linear table). */
static struct allocation {
  u64 base;
  size_t size;
} *allocations;
static size_t allocation_count, allocation_capacity;

static int allocate(u64 *address, size_t bytes) {
  size_t rounded = ((bytes ? bytes : 1) + 255) & ~(size_t)255;
  void *pointer = aligned_alloc(256, rounded);
  if (pointer == NULL) return OUT_OF_MEMORY;
  memset(pointer, 0xcd, rounded); /* not zeros: a kernel that reads what it never wrote shows */
  if (allocation_count == allocation_capacity) {
    size_t capacity = allocation_capacity ? 2 * allocation_capacity : 64;
    struct allocation *grown = realloc(allocations, capacity * sizeof *grown);
    if (grown == NULL) {
      free(pointer);
      return OUT_OF_MEMORY;
    }
    allocations = grown;
    allocation_capacity = capacity;
  }
  allocations[allocation_count].base = (u64)(size_t)pointer;
  allocations[allocation_count].size = bytes;
  allocation_count++;
  *address = (u64)(size_t)pointer;
  return SUCCESS;
}

static int release(u64 address) {
  for (size_t i = 0; i < allocation_count; i++) {
    if (allocations[i].base == address) {
      allocations[i] = allocations[--allocation_count];
      free((void *)(size_t)address);
      return SUCCESS;
    }
  }
  return INVALID_VALUE;
}

int cuMemAllocAsync(u64 *address, size_t bytes, void *stream) { return allocate(address, bytes); }
int cuMemAlloc_v2(u64 *address, size_t bytes) { return allocate(address, bytes); }
int cuMemFreeAsync(u64 address, void *stream) { return release(address); }
int cuMemFree_v2(u64 address) { return release(address); }

int cuMemGetAddressRange_v2(u64 *base, size_t *size, u64 address) {
  for (size_t i = 0; i < allocation_count; i++) {
    const struct allocation *a = &allocations[i];
    if (address >= a->base && address < a->base + (a->size ? a->size : 1)) {
      if (base) *base = a->base;
      if (size) *size = a->size;
      return SUCCESS;
    }
  }
  return NOT_FOUND;
}

int cuMemcpyHtoDAsync_v2(u64 device, const void *host, size_t bytes, void *stream) {
  memmove((void *)(size_t)device, host, bytes);
  return SUCCESS;
}
int cuMemcpyDtoHAsync_v2(void *host, u64 device, size_t bytes, void *stream) {
  memmove(host, (const void *)(size_t)device, bytes);
  return SUCCESS;
}
int cuMemcpyDtoDAsync_v2(u64 to, u64 from, size_t bytes, void *stream) {
  memmove((void *)(size_t)to, (const void *)(size_t)from, bytes);
  return SUCCESS;
}
int cuMemcpyPeerAsync(u64 to, void *to_context, u64 from, void *from_context, size_t bytes,
                      void *stream) {
  memmove((void *)(size_t)to, (const void *)(size_t)from, bytes);
  return SUCCESS;
}

/* CUDA_MEMCPY2D (cuda.h); memory types: 1 host, 2 device, 4 unified (all host memory here). */
typedef struct {
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void *srcHost;
  u64 srcDevice;
  void *srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void *dstHost;
  u64 dstDevice;
  void *dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} memcpy2d;

int cuMemcpy2DAsync_v2(const memcpy2d *copy, void *stream) {
  if (copy->srcMemoryType == 3 || copy->dstMemoryType == 3) return INVALID_VALUE; /* arrays */
  const char *source = copy->srcMemoryType == 1 ? (const char *)copy->srcHost
                                                : (const char *)(size_t)copy->srcDevice;
  char *target = copy->dstMemoryType == 1 ? (char *)copy->dstHost : (char *)(size_t)copy->dstDevice;
  source += copy->srcY * copy->srcPitch + copy->srcXInBytes;
  target += copy->dstY * copy->dstPitch + copy->dstXInBytes;
  for (size_t row = 0; row < copy->Height; row++) {
    memmove(target + row * copy->dstPitch, source + row * copy->srcPitch, copy->WidthInBytes);
  }
  return SUCCESS;
}

int cuMemsetD8Async(u64 device, unsigned char value, size_t count, void *stream) {
  memset((void *)(size_t)device, value, count);
  return SUCCESS;
}
int cuMemsetD16Async(u64 device, unsigned short value, size_t count, void *stream) {
  unsigned short *p = (unsigned short *)(size_t)device;
  for (size_t i = 0; i < count; i++) p[i] = value;
  return SUCCESS;
}
int cuMemsetD32Async(u64 device, unsigned int value, size_t count, void *stream) {
  unsigned int *p = (unsigned int *)(size_t)device;
  for (size_t i = 0; i < count; i++) p[i] = value;
  return SUCCESS;
}

static const char MODULE_PREFIX[] = "cpu-cuda module\n";

int cuModuleLoadData(void **module, const void *image) {
  const char *text = (const char *)image;
  size_t prefix = sizeof MODULE_PREFIX - 1;
  if (strncmp(text, MODULE_PREFIX, prefix) != 0) return INVALID_IMAGE;
  unsigned long long length;
  memcpy(&length, text + prefix, 8);
  if (length == 0 || length > (1ULL << 30)) return INVALID_IMAGE;
  /* A file of a name never used before in this process (dlopen knows a library by its path,
     and one whose C++ has unique symbols stays loaded after dlclose), removed once loaded. */
  const char *tmp = getenv("TMPDIR");
  char folder[256], path[300];
  snprintf(folder, sizeof folder, "%s/cpu-cuda-module-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(folder) == NULL) return INVALID_IMAGE;
  snprintf(path, sizeof path, "%s/module.so", folder);
  FILE *file = fopen(path, "wb");
  int written = file != NULL && fwrite(text + prefix + 8, 1, length, file) == length;
  if (file != NULL && fclose(file) != 0) written = 0;
  void *handle = written ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  unlink(path);
  rmdir(folder);
  if (handle == NULL) return INVALID_IMAGE;
  *module = handle;
  return SUCCESS;
}
int cuModuleLoadDataEx(void **module, const void *image, unsigned n, void *options, void *values) {
  return cuModuleLoadData(module, image);
}
int cuModuleUnload(void *module) { return dlclose(module) == 0 ? SUCCESS : INVALID_VALUE; }
int cuModuleGetFunction(void **function, void *module, const char *name) {
  char symbol[512];
  if (strlen(name) + sizeof "ct_cpu_launch_" > sizeof symbol) return NOT_FOUND;
  strcpy(symbol, "ct_cpu_launch_");
  strcat(symbol, name);
  void *found = dlsym(module, symbol);
  if (found == NULL) return NOT_FOUND;
  *function = found;
  return SUCCESS;
}

int cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned shared, void *stream, void **parameters,
                   void **extra) {
  if (parameters == NULL && extra != NULL) return INVALID_VALUE; /* packed arguments: not here */
  if ((u64)bx * by * bz > 1024 || bx * by * bz == 0 || gx * gy * gz == 0) return INVALID_VALUE;
  return ((launcher)function)(gx, gy, gz, bx, by, bz, parameters) == 0 ? SUCCESS : LAUNCH_FAILED;
}

/* CUlaunchConfig (cuda.h). */
typedef struct {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  void *hStream;
  void *attrs;
  unsigned numAttrs;
} launch_config;

int cuLaunchKernelEx(const launch_config *config, void *function, void **parameters,
                     void **extra) {
  return cuLaunchKernel(function, config->gridDimX, config->gridDimY, config->gridDimZ,
                        config->blockDimX, config->blockDimY, config->blockDimZ,
                        config->sharedMemBytes, config->hStream, parameters, extra);
}
