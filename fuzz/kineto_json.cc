// Fuzz target: the Kineto trace loader (kineto/kineto.h), with and without
// the memory events.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kineto/kineto.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  prism::KinetoTraceOptions options;
  options.memory = size % 2 == 0;
  (void)prism::parse_kineto_trace(text, "fuzz.json", options);
  return 0;
}
