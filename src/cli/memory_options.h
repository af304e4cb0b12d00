// The memory options `prism simulate`, `replay` and `emulate` share:
// --alloc-conf and --memory-fraction (simulation/memory_settings.h).
#pragma once

#include "simulation/memory_settings.h"

namespace CLI {
class App;
}  // namespace CLI

namespace prism {

struct MemoryOptions : MemorySettings {
  // Registers --alloc-conf and --memory-fraction on `app`.
  void add_to(CLI::App* app);
};

}  // namespace prism
