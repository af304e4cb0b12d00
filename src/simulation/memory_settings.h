// The memory settings of a replay's ranks as a user gives them: the caching
// allocator's configuration (PYTORCH_CUDA_ALLOC_CONF syntax) and the
// process's memory fraction; device() applies them to a GPU.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mem/memory_model.h"
#include "util/status.h"

namespace prism {

struct MemorySettings {
  std::string alloc_conf;                 // --alloc-conf
  std::optional<double> memory_fraction;  // --memory-fraction, in (0, 1]

  // The options for one rank's device: the capacity PyTorch reports for
  // `gpu` (a GPU preset name; an unknown GPU gets no limit) less its CUDA
  // context, and the allocator configuration. Errors name the option.
  Result<DeviceMemoryOptions> device(std::string_view gpu) const;
};

}  // namespace prism
