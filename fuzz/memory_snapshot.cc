// Fuzz target: the memory snapshot / trace loader (mem/snapshot.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "mem/snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)prism::parse_memory_trace(text, "fuzz.json");
  return 0;
}
