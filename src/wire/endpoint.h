// Asio endpoints for Addresses; internal to wire/ (the only place Asio is
// included, so the rest of the project compiles without it).
#pragma once

#include <asio.hpp>

#include "util/status.h"
#include "wire/address.h"

namespace prism::wire {

// A Unix path as is; a TCP host resolved (the first address it has).
Result<asio::generic::stream_protocol::endpoint> resolve_endpoint(const Address& a,
                                                                  asio::io_context& io);

// The Address a bound endpoint stands for (a TCP port 0 becomes the real one).
Address address_of(const Address& requested, const asio::generic::stream_protocol::endpoint& ep);

// TCP_NODELAY on TCP sockets: frames are small and answered at once.
void set_no_delay(const Address& a, asio::generic::stream_protocol::socket& s);

}  // namespace prism::wire
