// Fuzz target: the Kineto trace loader (kineto/kineto.h), with and without
// the memory events, and the kernel calibration from a trace
// (kineto/kernel_calibration.h), which reads the operators' shapes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kineto/kernel_calibration.h"
#include "kineto/kineto.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  prism::KinetoTraceOptions options;
  options.memory = size % 2 == 0;
  (void)prism::parse_kineto_trace(text, "fuzz.json", options);
  prism::KernelCalibrationOptions calibration;
  calibration.gpu = size % 3 == 0 ? "H100-SXM5-80GB" : "";
  calibration.date = "2026-11-27";
  (void)prism::calibrate_kernels({{"fuzz.json", std::string(text)}}, calibration);
  return 0;
}
