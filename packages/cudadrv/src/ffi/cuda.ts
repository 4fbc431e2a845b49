/**
 * libcuda through koffi: declarations named exactly as in cuda.h (the `_v2` entry points
 * where cuda.h maps to them), with the C prototype above each. Loaded on first use.
 *
 * Conventions: handles (CUcontext, CUstream, ...) are `void *` and travel as BigInt, except on
 * the hot paths (launch, stream-ordered alloc/free, stream and event calls, copies), where
 * handles and device pointers are declared `uint64_t`: koffi takes a BigInt or a Number there,
 * and the hot paths pass Numbers (`ffiValue`), which need no BigInt work per call.
 * CUdeviceptr is `uint64_t`. Hot-path out-parameters are written into a reused
 * `koffi.alloc` scratch arena (see `Scratch`) rather than per-call arrays.
 */
import { CudaUnavailableError } from '../errors.js';
import { funcFirst, koffi, lazyBindings, loadLibrary } from './library.js';

/** CUresult values that the TypeScript layer branches on. */
export const CUresult = {
  CUDA_SUCCESS: 0,
  CUDA_ERROR_INVALID_VALUE: 1,
  CUDA_ERROR_OUT_OF_MEMORY: 2,
  CUDA_ERROR_NOT_INITIALIZED: 3,
  CUDA_ERROR_NO_DEVICE: 100,
  CUDA_ERROR_INVALID_DEVICE: 101,
  CUDA_ERROR_NOT_READY: 600,
  CUDA_ERROR_ILLEGAL_ADDRESS: 700,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: 704,
} as const;

/** Errors after which the context cannot be used again (the process must restart). */
export const STICKY_ERRORS: ReadonlySet<number> = new Set([
  214, // CUDA_ERROR_ECC_UNCORRECTABLE
  700, // CUDA_ERROR_ILLEGAL_ADDRESS
  702, // CUDA_ERROR_LAUNCH_TIMEOUT
  710, // CUDA_ERROR_ASSERT
  714, // CUDA_ERROR_HARDWARE_STACK_ERROR
  715, // CUDA_ERROR_ILLEGAL_INSTRUCTION
  716, // CUDA_ERROR_MISALIGNED_ADDRESS
  717, // CUDA_ERROR_INVALID_ADDRESS_SPACE
  718, // CUDA_ERROR_INVALID_PC
  719, // CUDA_ERROR_LAUNCH_FAILED
]);

/** CUstream_flags: the stream does not synchronize with the legacy NULL stream. */
export const CU_STREAM_NON_BLOCKING = 0x1;
/** CUevent_flags: default event creation flag. */
export const CU_EVENT_DEFAULT = 0x0;
/** CUevent_flags: cuEventSynchronize sleeps instead of spinning. */
export const CU_EVENT_BLOCKING_SYNC = 0x1;
/** CUevent_flags: the event records no timestamp (cheaper to record and query). */
export const CU_EVENT_DISABLE_TIMING = 0x2;
/** cuMemHostAlloc flag: the pinned memory counts as pinned in every CUDA context. */
export const CU_MEMHOSTALLOC_PORTABLE = 0x1;
/** cuMemHostRegister flag: the registered memory counts as pinned in every CUDA context. */
export const CU_MEMHOSTREGISTER_PORTABLE = 0x1;
/** cuMemHostRegister flag: the registered memory is mapped into the device address space. */
export const CU_MEMHOSTREGISTER_DEVICEMAP = 0x2;
/** CUmemPool_attribute: bytes the pool keeps reserved before releasing memory to the OS (uint64). */
export const CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4;
/** CUmemPool_attribute: bytes of backing memory the pool holds now (uint64). */
export const CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5;
/** CUmemPool_attribute: high watermark of reserved bytes (uint64). */
export const CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6;
/** CUmemPool_attribute: bytes handed out by the pool now (uint64). */
export const CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7;
/** CUmemPool_attribute: high watermark of used bytes (uint64). */
export const CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8;
/** CUdevice_attribute: maximum threads per block. */
export const CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
/** CUdevice_attribute: warp size in threads. */
export const CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
/** CUdevice_attribute: number of streaming multiprocessors. */
export const CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
/** CUdevice_attribute: compute capability, major number. */
export const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
/** CUdevice_attribute: compute capability, minor number. */
export const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
/** CUdevice_attribute: 1 when the device supports cuMemAllocAsync and memory pools. */
export const CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115;
/** CUfunction_attribute: the most threads per block this kernel can launch with. */
export const CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
/** CUfunction_attribute: registers each thread of this kernel uses. */
export const CU_FUNC_ATTRIBUTE_NUM_REGS = 4;

/** Where libcuda is found, and what to say when it is not. */
export const libcudaSpec = {
  displayName: 'The NVIDIA CUDA driver (libcuda)',
  environmentVariable: 'CUDA_TASKS_LIBCUDA',
  candidates: ['libcuda.so.1', 'libcuda.so'],
  installHint:
    'Install the NVIDIA GPU driver (version 525 or newer for CUDA 12, 580 or newer for CUDA 13) on a machine with an NVIDIA GPU.',
  minimumVersion: 'the driver of CUDA 12.0 or newer (version 525 or newer)',
} as const;

/** CUevent_flags: the event may be shared with other processes (cuIpcGetEventHandle). */
export const CU_EVENT_INTERPROCESS = 0x4;
/** CUipcMem_flags: cuIpcOpenMemHandle enables peer access lazily (the only flag). */
export const CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1;
/** CUpointer_attribute: memory operations on the allocation synchronize (set on shared memory). */
export const CU_POINTER_ATTRIBUTE_SYNC_MEMOPS = 6;
/** Bytes of a CUipcMemHandle and of a CUipcEventHandle (CU_IPC_HANDLE_SIZE). */
export const CU_IPC_HANDLE_SIZE = 64;

/** CUmemorytype: host memory. */
export const CU_MEMORYTYPE_HOST = 1;
/** CUmemorytype: device memory. */
export const CU_MEMORYTYPE_DEVICE = 2;

/** The libcuda bindings, loaded on first call. */
export const cuda = lazyBindings(() => {
  const lib = loadLibrary(libcudaSpec);
  const k = koffi();
  // typedef struct CUDA_MEMCPY2D_st { ... } CUDA_MEMCPY2D;
  // typedef struct CUipcMemHandle_st { char reserved[CU_IPC_HANDLE_SIZE]; } CUipcMemHandle;
  k.struct('CUipcMemHandle', { reserved: k.array('uint8_t', 64, 'Typed') });
  // typedef struct CUipcEventHandle_st { char reserved[CU_IPC_HANDLE_SIZE]; } CUipcEventHandle;
  k.struct('CUipcEventHandle', { reserved: k.array('uint8_t', 64, 'Typed') });
  k.struct('CUDA_MEMCPY2D', {
    srcXInBytes: 'size_t',
    srcY: 'size_t',
    srcMemoryType: 'int',
    srcHost: 'void *',
    srcDevice: 'uint64_t',
    srcArray: 'void *',
    srcPitch: 'size_t',
    dstXInBytes: 'size_t',
    dstY: 'size_t',
    dstMemoryType: 'int',
    dstHost: 'void *',
    dstDevice: 'uint64_t',
    dstArray: 'void *',
    dstPitch: 'size_t',
    WidthInBytes: 'size_t',
    Height: 'size_t',
  });
  return {
    // CUresult cuInit(unsigned int Flags);
    cuInit: lib.func('int cuInit(unsigned int flags)'),
    // CUresult cuDriverGetVersion(int *driverVersion);
    cuDriverGetVersion: lib.func('int cuDriverGetVersion(_Out_ int *driverVersion)'),
    // CUresult cuGetErrorName(CUresult error, const char **pStr);
    cuGetErrorName: lib.func('int cuGetErrorName(int error, _Out_ const char **pStr)'),
    // CUresult cuGetErrorString(CUresult error, const char **pStr);
    cuGetErrorString: lib.func('int cuGetErrorString(int error, _Out_ const char **pStr)'),

    // CUresult cuDeviceGet(CUdevice *device, int ordinal);
    cuDeviceGet: lib.func('int cuDeviceGet(_Out_ int *device, int ordinal)'),
    // CUresult cuDeviceGetCount(int *count);
    cuDeviceGetCount: lib.func('int cuDeviceGetCount(_Out_ int *count)'),
    // CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
    cuDeviceGetName: lib.func('int cuDeviceGetName(_Out_ uint8_t *name, int len, int dev)'),
    // CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev);
    cuDeviceGetAttribute: lib.func('int cuDeviceGetAttribute(_Out_ int *pi, int attrib, int dev)'),
    // CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
    cuDeviceTotalMem_v2: lib.func('int cuDeviceTotalMem_v2(_Out_ size_t *bytes, int dev)'),
    // CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev);
    cuDeviceGetUuid: funcFirst(lib, [
      'int cuDeviceGetUuid_v2(_Out_ uint8_t *uuid, int dev)',
      'int cuDeviceGetUuid(_Out_ uint8_t *uuid, int dev)',
    ]),
    // CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev);
    cuDeviceCanAccessPeer: lib.func(
      'int cuDeviceCanAccessPeer(_Out_ int *canAccess, int dev, int peerDev)',
    ),
    // CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev);
    cuDeviceGetDefaultMemPool: lib.func(
      'int cuDeviceGetDefaultMemPool(_Out_ void **pool, int dev)',
    ),
    // CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
    cuDevicePrimaryCtxRetain: lib.func('int cuDevicePrimaryCtxRetain(_Out_ void **pctx, int dev)'),
    // CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
    cuDevicePrimaryCtxRelease_v2: lib.func('int cuDevicePrimaryCtxRelease_v2(int dev)'),

    // CUresult cuCtxSetCurrent(CUcontext ctx);
    cuCtxSetCurrent: lib.func('int cuCtxSetCurrent(void *ctx)'),
    // CUresult cuCtxGetCurrent(CUcontext *pctx);
    cuCtxGetCurrent: lib.func('int cuCtxGetCurrent(_Out_ void **pctx)'),
    // CUresult cuCtxSynchronize(void);
    cuCtxSynchronize: lib.func('int cuCtxSynchronize()'),
    // CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority);
    cuCtxGetStreamPriorityRange: lib.func(
      'int cuCtxGetStreamPriorityRange(_Out_ int *leastPriority, _Out_ int *greatestPriority)',
    ),
    // CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags);
    cuCtxEnablePeerAccess: lib.func(
      'int cuCtxEnablePeerAccess(void *peerContext, unsigned int flags)',
    ),
    // CUresult cuMemGetInfo_v2(size_t *free, size_t *total);
    cuMemGetInfo_v2: lib.func('int cuMemGetInfo_v2(_Out_ size_t *free, _Out_ size_t *total)'),

    // CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority);
    cuStreamCreateWithPriority: lib.func(
      'int cuStreamCreateWithPriority(_Out_ void **phStream, unsigned int flags, int priority)',
    ),
    // CUresult cuStreamDestroy_v2(CUstream hStream);
    cuStreamDestroy_v2: lib.func('int cuStreamDestroy_v2(void *hStream)'),
    // CUresult cuStreamQuery(CUstream hStream);
    cuStreamQuery: lib.func('int cuStreamQuery(uint64_t hStream)'),
    // CUresult cuStreamSynchronize(CUstream hStream);
    cuStreamSynchronize: lib.func('int cuStreamSynchronize(uint64_t hStream)'),
    // CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags);
    cuStreamWaitEvent: lib.func(
      'int cuStreamWaitEvent(uint64_t hStream, uint64_t hEvent, unsigned int flags)',
    ),
    // CUresult cuStreamGetPriority(CUstream hStream, int *priority);
    cuStreamGetPriority: lib.func('int cuStreamGetPriority(void *hStream, _Out_ int *priority)'),
    // CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags);
    cuStreamGetFlags: lib.func('int cuStreamGetFlags(void *hStream, _Out_ unsigned int *flags)'),

    // CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags);
    cuEventCreate: lib.func('int cuEventCreate(_Out_ void **phEvent, unsigned int flags)'),
    // CUresult cuEventDestroy_v2(CUevent hEvent);
    cuEventDestroy_v2: lib.func('int cuEventDestroy_v2(void *hEvent)'),
    // CUresult cuEventRecord(CUevent hEvent, CUstream hStream);
    cuEventRecord: lib.func('int cuEventRecord(uint64_t hEvent, uint64_t hStream)'),
    // CUresult cuEventQuery(CUevent hEvent);
    cuEventQuery: lib.func('int cuEventQuery(uint64_t hEvent)'),
    // CUresult cuEventSynchronize(CUevent hEvent);
    cuEventSynchronize: lib.func('int cuEventSynchronize(uint64_t hEvent)'),
    // CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd);
    cuEventElapsedTime: funcFirst(lib, [
      'int cuEventElapsedTime_v2(_Out_ float *ms, void *hStart, void *hEnd)',
      'int cuEventElapsedTime(_Out_ float *ms, void *hStart, void *hEnd)',
    ]),

    // CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
    cuMemAllocAsync: lib.func(
      'int cuMemAllocAsync(uint64_t dptr, uint64_t bytesize, uint64_t hStream)',
    ),
    // CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);
    // CUdeviceptr travels as a pointer-sized argument: koffi converts a BigInt to a pointer
    // faster than to uint64_t, and the x86-64 and AArch64 ABIs pass both the same way.
    cuMemFreeAsync: lib.func('int cuMemFreeAsync(uint64_t dptr, uint64_t hStream)'),
    // CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
    cuMemPoolSetAttribute: lib.func('int cuMemPoolSetAttribute(void *pool, int attr, void *value)'),
    // CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value);
    cuMemPoolGetAttribute: lib.func('int cuMemPoolGetAttribute(void *pool, int attr, void *value)'),
    // CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep);
    cuMemPoolTrimTo: lib.func('int cuMemPoolTrimTo(void *pool, size_t minBytesToKeep)'),
    // CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags);
    cuMemHostAlloc: lib.func(
      'int cuMemHostAlloc(_Out_ void **pp, size_t bytesize, unsigned int flags)',
    ),
    // CUresult cuMemFreeHost(void *p);
    cuMemFreeHost: lib.func('int cuMemFreeHost(void *p)'),
    // CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags);
    cuMemHostRegister: funcFirst(lib, [
      'int cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags)',
      'int cuMemHostRegister(void *p, size_t bytesize, unsigned int flags)',
    ]),
    // CUresult cuMemHostUnregister(void *p);
    cuMemHostUnregister: lib.func('int cuMemHostUnregister(void *p)'),
    // CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags);
    cuMemHostGetDevicePointer: funcFirst(lib, [
      'int cuMemHostGetDevicePointer_v2(_Out_ uint64_t *pdptr, void *p, unsigned int flags)',
      'int cuMemHostGetDevicePointer(_Out_ uint64_t *pdptr, void *p, unsigned int flags)',
    ]),
    // CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream);
    cuMemcpyHtoDAsync_v2: lib.func(
      'int cuMemcpyHtoDAsync_v2(uint64_t dstDevice, void *srcHost, size_t byteCount, uint64_t hStream)',
    ),
    // CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream);
    cuMemcpyDtoHAsync_v2: lib.func(
      'int cuMemcpyDtoHAsync_v2(void *dstHost, uint64_t srcDevice, size_t byteCount, uint64_t hStream)',
    ),
    // CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream);
    cuMemcpyDtoDAsync_v2: lib.func(
      'int cuMemcpyDtoDAsync_v2(uint64_t dstDevice, uint64_t srcDevice, size_t byteCount, uint64_t hStream)',
    ),
    // CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, CUstream hStream);
    cuMemcpyPeerAsync: lib.func(
      'int cuMemcpyPeerAsync(uint64_t dstDevice, void *dstContext, uint64_t srcDevice, void *srcContext, size_t byteCount, void *hStream)',
    ),
    // CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream);
    cuMemcpy2DAsync_v2: lib.func(
      'int cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, void *hStream)',
    ),
    // CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);
    cuMemsetD8Async: lib.func(
      'int cuMemsetD8Async(uint64_t dstDevice, uint8_t value, size_t n, uint64_t hStream)',
    ),
    // CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream);
    cuMemsetD16Async: lib.func(
      'int cuMemsetD16Async(uint64_t dstDevice, uint16_t value, size_t n, uint64_t hStream)',
    ),
    // CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream);
    cuMemsetD32Async: lib.func(
      'int cuMemsetD32Async(uint64_t dstDevice, uint32_t value, size_t n, uint64_t hStream)',
    ),

    // CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
    cuMemAlloc_v2: lib.func('int cuMemAlloc_v2(_Out_ uint64_t *dptr, size_t bytesize)'),
    // CUresult cuMemFree_v2(CUdeviceptr dptr);
    cuMemFree_v2: lib.func('int cuMemFree_v2(uint64_t dptr)'),
    // CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attribute, CUdeviceptr ptr);
    cuPointerSetAttribute: lib.func(
      'int cuPointerSetAttribute(void *value, int attribute, uint64_t ptr)',
    ),
    // CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev);
    cuDeviceGetPCIBusId: lib.func(
      'int cuDeviceGetPCIBusId(_Out_ uint8_t *pciBusId, int len, int dev)',
    ),
    // CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr);
    cuIpcGetMemHandle: lib.func('int cuIpcGetMemHandle(_Out_ uint8_t *handle, uint64_t dptr)'),
    // CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags);
    cuIpcOpenMemHandle: lib.func(
      'int cuIpcOpenMemHandle_v2(_Out_ uint64_t *pdptr, CUipcMemHandle handle, unsigned int flags)',
    ),
    // CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr);
    cuMemGetAddressRange_v2: lib.func(
      'int cuMemGetAddressRange_v2(_Out_ uint64_t *pbase, _Out_ size_t *psize, uint64_t dptr)',
    ),
    // CUresult cuIpcCloseMemHandle(CUdeviceptr dptr);
    cuIpcCloseMemHandle: lib.func('int cuIpcCloseMemHandle(uint64_t dptr)'),
    // CUresult cuIpcGetEventHandle(CUipcEventHandle *pHandle, CUevent event);
    cuIpcGetEventHandle: lib.func('int cuIpcGetEventHandle(_Out_ uint8_t *handle, void *event)'),
    // CUresult cuIpcOpenEventHandle(CUevent *phEvent, CUipcEventHandle handle);
    cuIpcOpenEventHandle: lib.func(
      'int cuIpcOpenEventHandle(_Out_ void **phEvent, CUipcEventHandle handle)',
    ),

    // CUresult cuModuleLoadData(CUmodule *module, const void *image);
    cuModuleLoadData: lib.func('int cuModuleLoadData(_Out_ void **module, void *image)'),
    // CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions, CUjit_option *options, void **optionValues);
    cuModuleLoadDataEx: lib.func(
      'int cuModuleLoadDataEx(_Out_ void **module, void *image, unsigned int numOptions, void *options, void *optionValues)',
    ),
    // CUresult cuModuleUnload(CUmodule hmod);
    cuModuleUnload: lib.func('int cuModuleUnload(void *hmod)'),
    // CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
    cuModuleGetFunction: lib.func(
      'int cuModuleGetFunction(_Out_ void **hfunc, void *hmod, const char *name)',
    ),
    // CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc);
    cuFuncGetAttribute: lib.func('int cuFuncGetAttribute(_Out_ int *pi, int attrib, void *hfunc)'),
    // CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
    //   unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes,
    //   CUstream hStream, void **kernelParams, void **extra);
    // Handles and pointers as uint64_t: launch.ts passes Numbers (the fast conversion) and
    // `extra` as 0 rather than null (koffi converts a null pointer on a slower path).
    cuLaunchKernel: lib.func(
      'int cuLaunchKernel(uint64_t f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, uint64_t hStream, uint64_t kernelParams, uint64_t extra)',
    ),
    // CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra);
    // (CUDA 12.0+.) The config is a CUlaunchConfig in a reused native arena (see launch.ts).
    cuLaunchKernelEx: lib.func(
      'int cuLaunchKernelEx(uint64_t config, uint64_t f, uint64_t kernelParams, uint64_t extra)',
    ),
    // CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
    //   CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit);
    cuOccupancyMaxPotentialBlockSize: lib.func(
      'int cuOccupancyMaxPotentialBlockSize(_Out_ int *minGridSize, _Out_ int *blockSize, void *func, void *blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit)',
    ),
    // CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
    //   int blockSize, size_t dynamicSMemSize);
    cuOccupancyMaxActiveBlocksPerMultiprocessor: lib.func(
      'int cuOccupancyMaxActiveBlocksPerMultiprocessor(_Out_ int *numBlocks, void *func, int blockSize, size_t dynamicSMemSize)',
    ),
  };
});

/** The libcuda bindings' type. */
export type CudaBindings = ReturnType<typeof cuda>;

/**
 * cuCtxSynchronize_v2, bound on first use; null where the driver does not export it (it is
 * newer than the CUDA 12.0 driver we support; CUDA 13 drivers have it). It names its context,
 * so it can run on a worker thread through koffi's async call, where no context is current:
 * the out-of-memory wait of `DeviceBuffer.allocateAsync` uses it.
 */
export const contextSynchronizeBinding = lazyBindings(() => {
  const lib = loadLibrary(libcudaSpec);
  try {
    // CUresult cuCtxSynchronize_v2(CUcontext ctx);
    return lib.func('int cuCtxSynchronize_v2(void *ctx)') as {
      async(context: bigint, callback: (error: unknown, result: number) => void): void;
    };
  } catch (error) {
    if (CudaUnavailableError.isInstance(error)) return null;
    throw error;
  }
});
