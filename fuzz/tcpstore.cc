// Fuzz target: the TCPStore protocol parser (runtime/tcpstore_protocol.h).
// The dialect is detected from the bytes as the store does (or, when the
// bytes do not tell, taken from the first byte), then queries are decoded
// from the front until one needs more bytes or is an error. A decoded query
// consumes at least one byte and no more than there are.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_check.h"
#include "runtime/tcpstore_protocol.h"

namespace ts = prism::runtime::tcpstore;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> bytes(data, size);
  ts::Dialect dialect = ts::detect(bytes);
  if (dialect == ts::Dialect::kUnknown) {
    if (size == 0) return 0;
    dialect = data[0] % 2 == 0 ? ts::Dialect::kLegacy : ts::Dialect::kValidated;
  }
  // Small limits so that the bounds are reached by small inputs too.
  ts::Limits limits;
  limits.max_key_bytes = 64;
  limits.max_value_bytes = 256;
  limits.max_keys = 8;
  for (bool first = true; !bytes.empty(); first = false) {
    const ts::Decoded d = ts::decode(dialect, bytes, first, limits);
    if (d.kind != ts::Decoded::Kind::kQuery) break;
    PRISM_FUZZ_EXPECT(
        d.consumed > 0 && d.consumed <= bytes.size(),
        "consumed " + std::to_string(d.consumed) + " of " + std::to_string(bytes.size()));
    bytes = bytes.subspan(d.consumed);
  }
  return 0;
}
