// Where the coordinator listens: a Unix-domain socket (live ranks on the
// same host; the default, private to the user) or TCP (live ranks on other
// hosts). Written "unix:PATH" or "tcp:HOST:PORT"; an IPv6 host goes in
// brackets ("tcp:[::1]:29400"). PORT 0 asks the system for a free port.
// A third kind, in-process ("inproc:NAME", never parsed from text), joins a
// server and its clients in one process: a test's transport seam
// (wire/in_process.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace prism::wire {

struct Address {
  enum class Kind { kUnix, kTcp, kInProcess };
  Kind kind = Kind::kUnix;
  std::string path;  // kUnix; kInProcess: the name
  std::string host;  // kTcp: a name or a numeric address
  std::uint16_t port = 0;

  std::string to_string() const;
  friend bool operator==(const Address&, const Address&) = default;
};

// Parses "unix:PATH" or "tcp:HOST:PORT"; the error says which part is wrong.
Result<Address> parse_address(std::string_view text);

// Whether a TCP host is a loopback address ("127.x.x.x", "::1", "localhost").
bool is_loopback(const Address& a);

}  // namespace prism::wire
