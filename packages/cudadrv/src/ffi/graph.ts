/**
 * libcuda's stream capture and graph entry points through koffi, named as the driver exports
 * them (cuda.h #defines `cuStreamBeginCapture` to `cuStreamBeginCapture_v2`,
 * `cuGraphInstantiate` to `cuGraphInstantiateWithFlags`, `cuGraphExecUpdate` to
 * `cuGraphExecUpdate_v2`, `cuStreamGetCaptureInfo` to `cuStreamGetCaptureInfo_v3`), with the C
 * prototype above each. A group of its own, loaded on first use: a driver without one of
 * these symbols fails here, when graphs are first used, and nowhere else.
 *
 * Handles on the replay path (`cuGraphLaunch`) are `uint64_t`, so that the caller passes
 * Numbers (see `ffiValue`); the others are `void *` and travel as BigInt.
 */
import { libcudaSpec } from './cuda.js';
import { lazyBindings, loadLibrary } from './library.js';

/** CUstreamCaptureMode: this capture does not restrict potentially unsafe calls of any thread. */
export const CU_STREAM_CAPTURE_MODE_RELAXED = 2;
/** CUstreamCaptureStatus: the stream is not capturing. */
export const CU_STREAM_CAPTURE_STATUS_NONE = 0;
/** CUstreamCaptureStatus: the stream is capturing. */
export const CU_STREAM_CAPTURE_STATUS_ACTIVE = 1;
/** CUstreamCaptureStatus: the capture was invalidated by an error and must still be ended. */
export const CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2;
/** CUgraphInstantiate_flags: free the graph's unfreed allocations before each relaunch. */
export const CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH = 1;
/** CUevent_wait_flags: inside a capture, wait for the event as an external event node. */
export const CU_EVENT_WAIT_EXTERNAL = 0x1;
/** CUresult: the operation is not permitted while the stream is capturing. */
export const CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;
/** CUresult: the capture sequence was invalidated by an earlier error. */
export const CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901;
/** CUresult: cuGraphExecUpdate refused the update (see CUgraphExecUpdateResult). */
export const CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910;

/** CUgraphExecUpdateResult names, by value (cuda.h's `CUgraphExecUpdateResult_enum`). */
export const CU_GRAPH_EXEC_UPDATE_RESULT_NAMES: readonly string[] = [
  'CU_GRAPH_EXEC_UPDATE_SUCCESS',
  'CU_GRAPH_EXEC_UPDATE_ERROR',
  'CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED',
  'CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED',
  'CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED',
  'CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED',
  'CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED',
  'CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE',
  'CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED',
];

/** The graph bindings, loaded on first call. */
export const cudaGraph = lazyBindings(() => {
  const lib = loadLibrary(libcudaSpec);
  return {
    // CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode);
    cuStreamBeginCapture_v2: lib.func('int cuStreamBeginCapture_v2(uint64_t hStream, int mode)'),
    // CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph);
    cuStreamEndCapture: lib.func('int cuStreamEndCapture(uint64_t hStream, _Out_ void **phGraph)'),
    // CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus);
    cuStreamIsCapturing: lib.func(
      'int cuStreamIsCapturing(uint64_t hStream, _Out_ int *captureStatus)',
    ),
    // CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
    //   cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
    //   const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out);
    // (CUDA 12.3+.) Every out-parameter but the status may be NULL.
    cuStreamGetCaptureInfo_v3: lib.func(
      'int cuStreamGetCaptureInfo_v3(uint64_t hStream, _Out_ int *captureStatus, _Out_ uint64_t *id, void *graph, void *dependencies, void *edgeData, void *numDependencies)',
    ),
    // CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags);
    cuGraphInstantiateWithFlags: lib.func(
      'int cuGraphInstantiateWithFlags(_Out_ void **phGraphExec, void *hGraph, unsigned long long flags)',
    ),
    // CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream);
    cuGraphUpload: lib.func('int cuGraphUpload(uint64_t hGraphExec, uint64_t hStream)'),
    // CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream);
    cuGraphLaunch: lib.func('int cuGraphLaunch(uint64_t hGraphExec, uint64_t hStream)'),
    // CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo);
    // resultInfo is a CUgraphExecUpdateResultInfo (result at byte 0, errorNode at 8,
    // errorFromNode at 16: 24 bytes) in a native arena the caller reads.
    cuGraphExecUpdate_v2: lib.func(
      'int cuGraphExecUpdate_v2(void *hGraphExec, void *hGraph, void *resultInfo)',
    ),
    // CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes);
    // With nodes NULL, *numNodes returns the node count.
    cuGraphGetNodes: lib.func(
      'int cuGraphGetNodes(void *hGraph, void *nodes, _Inout_ size_t *numNodes)',
    ),
    // CUresult cuGraphDestroy(CUgraph hGraph);
    cuGraphDestroy: lib.func('int cuGraphDestroy(void *hGraph)'),
    // CUresult cuGraphExecDestroy(CUgraphExec hGraphExec);
    cuGraphExecDestroy: lib.func('int cuGraphExecDestroy(void *hGraphExec)'),
    // CUresult cuDeviceGraphMemTrim(CUdevice device);
    cuDeviceGraphMemTrim: lib.func('int cuDeviceGraphMemTrim(int device)'),
  };
});

/** The graph bindings' type. */
export type CudaGraphBindings = ReturnType<typeof cudaGraph>;
