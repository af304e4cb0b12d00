#include "simulation/memory_settings.h"

#include <fmt/format.h>

#include "mem/nccl_footprint.h"

namespace prism {

Result<DeviceMemoryOptions> MemorySettings::device(std::string_view gpu) const {
  DeviceMemoryOptions o;
  Result<AllocatorConfig> config = parse_alloc_conf(alloc_conf);
  if (!config.is_ok()) return config.status().with_context("--alloc-conf");
  o.allocator = config.value();
  if (memory_fraction) {
    const double f = *memory_fraction;
    if (!(f > 0 && f <= 1))
      return Status::invalid_argument(fmt::format("--memory-fraction: {} is outside (0, 1]", f));
    o.allocator.memory_fraction = f;
  }
  o.capacity = Bytes{gpu_total_memory(gpu)};
  o.context = Bytes{cuda_context_bytes(gpu)};
  return o;
}

}  // namespace prism
