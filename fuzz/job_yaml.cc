// Fuzz target: the job spec loader (workload/job_yaml.h). The source name is
// a path under a directory that does not exist, so a `cluster: FILE.yaml`
// the input names relative to it reads nothing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "workload/job_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)prism::parse_job_yaml(text, "/nonexistent-prism-fuzz/job.yaml");
  return 0;
}
