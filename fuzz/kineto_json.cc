// Fuzz target: the Kineto trace loader (kineto/kineto.h), with and without
// the memory events, and the kernel calibration from a trace
// (kineto/kernel_calibration.h), which reads the operators' shapes. The
// text is parsed once (kineto::parse_trace) and both read the parsed trace,
// as parse_kineto_trace and calibrate_kernels do after their own parse.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kineto/kernel_calibration.h"
#include "kineto/kineto.h"
#include "kineto/trace_events.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const prism::Result<prism::kineto::ParsedTrace> parsed =
      prism::kineto::parse_trace(text, "fuzz.json");
  if (!parsed.is_ok()) return 0;
  prism::KinetoTraceOptions options;
  options.memory = size % 2 == 0;
  (void)prism::kineto_trace_of(parsed.value(), options);
  prism::KernelCalibrationOptions calibration;
  calibration.gpu = size % 3 == 0 ? "H100-SXM5-80GB" : "";
  calibration.date = "2026-11-27";
  (void)prism::calibrate_parsed_kernels({&parsed.value()}, calibration);
  return 0;
}
