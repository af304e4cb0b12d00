#include "cli/memory_options.h"

#include <CLI/CLI.hpp>

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

}  // namespace prism
