// The host device: no CUDA. Every op takes the host path, and ncclMemAlloc
// hands out page-aligned host memory.
#include <cstdlib>
#include <cstring>

#include "shim/nccl/device.h"

namespace prism::nccl {
namespace {

constexpr std::size_t kPage = 4096;  // NCCL_WIN_REQUIRED_ALIGNMENT

class HostDevice final : public Device {
 public:
  bool holds_on(cudaStream_t) override { return false; }
  ncclResult_t hold(const char*, cudaStream_t, const prism_op*, std::size_t, std::span<const Copy>,
                    bool* held) override {
    *held = false;
    return ncclSuccess;
  }
  ncclResult_t copy(const char*, std::span<const Copy> copies) override {
    for (const Copy& c : copies) std::memmove(c.dst, c.src, c.bytes);
    return ncclSuccess;
  }
  bool defer_marker(int, int) override { return false; }
  void abandon(std::uint32_t) override {}
  int cu_device(int fallback) override { return fallback; }
  ncclResult_t mem_alloc(const char* fn, void** ptr, std::size_t bytes, bool* on_device) override {
    *on_device = false;
    return host_alloc(fn, ptr, bytes);
  }
  ncclResult_t mem_free(const char*, void* ptr, bool) override {
    std::free(ptr);
    return ncclSuccess;
  }
  ncclResult_t nccl_reserve(const char*, std::int64_t, void** ptr) override {
    *ptr = nullptr;
    return ncclSuccess;
  }
  void nccl_release(void*) override {}
  void stop() override {}
};

}  // namespace

ncclResult_t host_alloc(const char* fn, void** ptr, std::size_t bytes) noexcept {
  void* p = nullptr;
  if (posix_memalign(&p, kPage, bytes) != 0) {
    return failf(ncclSystemError, fn, "cannot allocate {} bytes of host memory", bytes);
  }
  *ptr = p;
  return ncclSuccess;
}

std::unique_ptr<Device> make_host_device() {
  return std::make_unique<HostDevice>();
}

}  // namespace prism::nccl
