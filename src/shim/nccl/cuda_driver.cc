#include "shim/nccl/cuda_driver.h"

#include <dlfcn.h>

#include <fmt/format.h>

// The name a cuda.h macro maps a function to (cuMemAlloc -> cuMemAlloc_v2):
// the entry point of the ABI this file was compiled against.
#define PRISM_CU_STR2(x) #x
#define PRISM_CU_STR(x) PRISM_CU_STR2(x)

namespace prism::nccl {
namespace {

// The versioned name first, then the plain one an older driver may have.
template <typename F>
bool find(void* lib, F* out, const char* versioned, const char* plain) {
  void* f = dlsym(lib, versioned);
  if (f == nullptr) f = dlsym(lib, plain);
  *out = reinterpret_cast<F>(f);
  return f != nullptr;
}

}  // namespace

bool CudaDriver::load() {
  // Never closed: the functions are used until the process ends.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return false;
#define PRISM_CU_FIND(member, fn) find(lib, &member, PRISM_CU_STR(fn), #fn)
  return PRISM_CU_FIND(ctx_get_current, cuCtxGetCurrent) &&
         PRISM_CU_FIND(ctx_set_current, cuCtxSetCurrent) &&
         PRISM_CU_FIND(ctx_get_device, cuCtxGetDevice) &&
         PRISM_CU_FIND(mem_host_alloc, cuMemHostAlloc) &&
         PRISM_CU_FIND(mem_host_get_device_pointer, cuMemHostGetDevicePointer) &&
         PRISM_CU_FIND(mem_alloc, cuMemAlloc) && PRISM_CU_FIND(mem_free, cuMemFree) &&
         PRISM_CU_FIND(stream_wait_value32, cuStreamWaitValue32) &&
         PRISM_CU_FIND(memcpy_async, cuMemcpyAsync) && PRISM_CU_FIND(memcpy, cuMemcpy) &&
         PRISM_CU_FIND(event_create, cuEventCreate) && PRISM_CU_FIND(event_record, cuEventRecord) &&
         PRISM_CU_FIND(event_query, cuEventQuery) &&
         PRISM_CU_FIND(event_elapsed_time, cuEventElapsedTime) &&
         PRISM_CU_FIND(get_error_string, cuGetErrorString);
#undef PRISM_CU_FIND
}

std::string CudaDriver::describe(CUresult r) const {
  const char* text = nullptr;
  if (get_error_string == nullptr || get_error_string(r, &text) != CUDA_SUCCESS || text == nullptr)
    return fmt::format("CUDA error {}", static_cast<int>(r));
  return fmt::format("CUDA error {} ({})", static_cast<int>(r), text);
}

}  // namespace prism::nccl
