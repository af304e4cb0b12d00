#include "wire/endpoint.h"

#include <cstring>

#include <fmt/format.h>

namespace prism::wire {

Result<asio::generic::stream_protocol::endpoint> resolve_endpoint(const Address& a,
                                                                  asio::io_context& io) {
  if (a.kind == Address::Kind::kUnix)
    return asio::generic::stream_protocol::endpoint(asio::local::stream_protocol::endpoint(a.path));
  if (a.kind == Address::Kind::kInProcess)
    return Status::invalid_argument(
        fmt::format("{}: an in-process address has no endpoint", a.to_string()));
  asio::ip::tcp::resolver resolver(io);
  asio::error_code ec;
  const auto results = resolver.resolve(a.host, std::to_string(a.port),
                                        asio::ip::tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return Status::invalid_argument(fmt::format("{}: cannot resolve host '{}': {}", a.to_string(),
                                                a.host,
                                                ec ? ec.message() : std::string("no address")));
  }
  return asio::generic::stream_protocol::endpoint(results.begin()->endpoint());
}

Address address_of(const Address& requested, const asio::generic::stream_protocol::endpoint& ep) {
  Address a = requested;
  if (a.kind == Address::Kind::kTcp) {
    asio::ip::tcp::endpoint tcp;
    std::memcpy(tcp.data(), ep.data(), ep.size());
    a.port = tcp.port();
  }
  return a;
}

void set_no_delay(const Address& a, asio::generic::stream_protocol::socket& s) {
  if (a.kind != Address::Kind::kTcp) return;
  asio::error_code ignored;
  s.set_option(asio::ip::tcp::no_delay(true), ignored);
}

}  // namespace prism::wire
