// The memory options `prism simulate` and `prism replay` share: the caching
// allocator's configuration (PYTORCH_CUDA_ALLOC_CONF syntax), the process's
// memory fraction, and the device they apply to.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mem/memory_model.h"
#include "util/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace prism {

struct MemoryOptions {
  std::string alloc_conf;
  std::optional<double> memory_fraction;

  // Registers --alloc-conf and --memory-fraction on `app`.
  void add_to(CLI::App* app);
  // The options for one rank's device: the capacity PyTorch reports for
  // `gpu` (a GPU preset name; an unknown GPU gets no limit) less its CUDA
  // context, and the allocator configuration. Errors name the option.
  Result<DeviceMemoryOptions> device(std::string_view gpu) const;
};

}  // namespace prism
