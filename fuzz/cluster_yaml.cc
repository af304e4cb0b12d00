// Fuzz target: the cluster spec loader (net/cluster_yaml.h). A spec that
// loads must format to YAML that loads again.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "net/cluster_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const prism::Result<prism::ClusterSpec> c = prism::parse_cluster_yaml(text, "fuzz.yaml");
  if (!c.is_ok()) return 0;
  const std::string yaml = prism::format_cluster_yaml(*c);
  const prism::Result<prism::ClusterSpec> again = prism::parse_cluster_yaml(yaml, "again.yaml");
  PRISM_FUZZ_EXPECT(again.is_ok(), again.status().message());
  return 0;
}
