// The few CUDA driver functions the GPU path needs, looked up at run time
// in libcuda.so.1: the drop-in has no link dependency on CUDA, and a
// machine without a driver gets the host path. The types come from cuda.h
// (decltype of its declarations), so a signature cannot drift.
#pragma once

#include <cuda.h>

#include <string>

namespace prism::nccl {

struct CudaDriver {
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuCtxGetDevice) ctx_get_device = nullptr;
  decltype(&::cuMemHostAlloc) mem_host_alloc = nullptr;
  decltype(&::cuMemHostGetDevicePointer) mem_host_get_device_pointer = nullptr;
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuStreamWaitValue32) stream_wait_value32 = nullptr;
  decltype(&::cuMemcpyAsync) memcpy_async = nullptr;
  decltype(&::cuMemcpy) memcpy = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventQuery) event_query = nullptr;
  decltype(&::cuEventElapsedTime) event_elapsed_time = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;

  // Opens libcuda.so.1 and finds every function; false when one is missing.
  bool load();
  // "CUDA_ERROR_...: text" for messages.
  std::string describe(CUresult r) const;
};

}  // namespace prism::nccl
