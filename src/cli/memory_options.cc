#include "cli/memory_options.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "mem/nccl_footprint.h"

namespace prism {

void MemoryOptions::add_to(CLI::App* app) {
  app->add_option("--alloc-conf", alloc_conf,
                  "PyTorch caching-allocator settings, PYTORCH_CUDA_ALLOC_CONF syntax (e.g. "
                  "expandable_segments:True,max_split_size_mb:512); default: PyTorch's defaults")
      ->type_name("CONF");
  app->add_option("--memory-fraction", memory_fraction,
                  "torch.cuda.set_per_process_memory_fraction: the share of the GPU the "
                  "allocator may use, in (0, 1]")
      ->type_name("F");
}

Result<DeviceMemoryOptions> MemoryOptions::device(std::string_view gpu) const {
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
