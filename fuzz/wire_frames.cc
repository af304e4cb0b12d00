// Fuzz target: the wire protocol's frame decoder (wire/protocol.h). The
// first byte sets the size of the pieces the rest arrives in (a socket
// delivers bytes in any split); messages are taken until the decoder needs
// more or fails, after every piece. After an error the decoder keeps
// failing.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "wire/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = data[0] == 0 ? size : data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  prism::wire::FrameDecoder decoder;
  bool failed = false;
  for (std::size_t at = 0; at < bytes.size() && !failed; at += piece) {
    decoder.feed(bytes.substr(at, std::min(piece, bytes.size() - at)));
    for (;;) {
      const auto m = decoder.next();
      if (!m.is_ok()) {
        failed = true;
        PRISM_FUZZ_EXPECT(!decoder.next().is_ok(), "the decoder recovered after an error");
        break;
      }
      if (!m->has_value()) break;
    }
  }
  return 0;
}
