// Fuzz target: the capture file reader (slicing/capture_file.h). A capture
// that reads must write back to a document that reads to the same text: the
// file is the format's one writer and one reader.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "slicing/capture_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const prism::Result<prism::RankCapture> c = prism::parse_capture_json(text, "fuzz.json");
  if (!c.is_ok()) return 0;
  const std::string json = prism::format_capture_json(*c);
  const prism::Result<prism::RankCapture> again = prism::parse_capture_json(json, "again.json");
  PRISM_FUZZ_EXPECT(again.is_ok(), again.status().message());
  PRISM_FUZZ_EXPECT(prism::format_capture_json(*again) == json,
                    "the written capture reads back different");
  return 0;
}
