// prism_bench_wire: the round trip a live rank pays per communication op
// (docs/benchmarks.md). Target: p50 <= 20 us over a Unix socket.
//
// A wire::Server runs on a thread of its own and answers every Op with a
// Complete, as the coordinator will once it knows the completion time; the
// main thread is the live rank: it sends an Op and blocks in receive() for
// the answer, --ops times after --warmup. Each round trip is timed with
// steady_clock; the table gives p50, p90, p99 and max per transport, each the
// median over --repeats runs. Both transports run in one process, side by
// side, alternating, each twice: blocking (the server thread sleeps in
// epoll, the rank in poll) and spinning (the server polls without
// blocking, the rank spins up to 200 us on non-blocking reads), which is
// how the runtime runs.
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "wire/connection.h"
#include "wire/server.h"

namespace prism::wire {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

class Answerer : public ServerHandler {
 public:
  Server* server = nullptr;
  void on_message(PeerId peer, Message m) override {
    if (const auto* op = std::get_if<Op>(&m)) server->send(peer, Complete{op->op_id, op->at + 1});
  }
  void on_close(PeerId, const Status&) override {}
};

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, max = 0;  // microseconds
};

double at(std::vector<double>& v, double q) {
  const auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

Result<Percentiles> run(const Address& where, int ops, int warmup, bool spin) {
  Answerer answerer;
  Server server(answerer, {});
  answerer.server = &server;
  PRISM_ASSIGN_OR_RETURN(const Address bound, server.listen(where));
  std::atomic<bool> done{false};
  std::thread loop([&] {
    while (!done) spin ? server.poll() : server.run_for(10ms);
  });
  Result<std::unique_ptr<Connection>> c = Connection::open(bound, 5000ms);
  if (c.is_ok() && spin) c.value()->set_spin(std::chrono::microseconds(200));
  std::vector<double> us;
  Status failure;
  if (!c.is_ok()) failure = c.status();
  for (int i = 0; failure.is_ok() && i < warmup + ops; ++i) {
    const auto t0 = Clock::now();
    failure = c.value()->send(
        Op{static_cast<std::uint32_t>(i), 0, 0, OpCode::kAllReduce, DType::kBFloat16, 1 << 20});
    if (!failure.is_ok()) break;
    Result<Message> r = c.value()->receive(5000ms);
    if (!r.is_ok()) failure = r.status();
    const auto t1 = Clock::now();
    if (i >= warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  done = true;
  loop.join();
  PRISM_RETURN_IF_ERROR(failure);
  Percentiles p;
  p.p50 = at(us, 0.50), p.p90 = at(us, 0.90), p.p99 = at(us, 0.99);
  p.max = *std::max_element(us.begin(), us.end());
  return p;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main_impl(int argc, char** argv) {
  CLI::App app{"Round trip of one op over the live-rank wire (Unix socket and TCP loopback)"};
  int ops = 20000, warmup = 1000, repeats = 5;
  app.add_option("--ops", ops, "Round trips timed per run")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "Round trips before timing")->check(CLI::NonNegativeNumber);
  app.add_option("--repeats", repeats, "Runs per transport (median reported)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const auto dir =
      std::filesystem::temp_directory_path() / ("prism-bench-wire-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const Address unix_socket{Address::Kind::kUnix, (dir / "bench.sock").string(), "", 0};
  const Address tcp{Address::Kind::kTcp, "", "127.0.0.1", 0};
  struct Transport {
    std::string name;
    Address where;
    bool spin;
  };
  const std::vector<Transport> transports = {
      {"unix", unix_socket, false},
      {"tcp", tcp, false},
      {"unix+spin", unix_socket, true},
      {"tcp+spin", tcp, true},
  };
  std::vector<std::vector<Percentiles>> results(transports.size());
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t t = 0; t < transports.size(); ++t) {
      Result<Percentiles> p = run(transports[t].where, ops, warmup, transports[t].spin);
      if (!p.is_ok()) {
        fmt::print(stderr, "error: {}\n", p.status().message());
        return 1;
      }
      results[t].push_back(p.value());
    }
  }
  std::filesystem::remove_all(dir);
  fmt::print("{} round trips per run, {} runs per transport (median of runs), microseconds\n", ops,
             repeats);
  fmt::print("{:<10}{:>10}{:>10}{:>10}{:>10}\n", "transport", "p50", "p90", "p99", "max");
  // One figure of a transport: the median over its runs.
  auto pick = [&](std::size_t t, double Percentiles::*f) {
    std::vector<double> v;
    for (const Percentiles& p : results[t]) v.push_back(p.*f);
    return median(v);
  };
  for (std::size_t t = 0; t < transports.size(); ++t) {
    fmt::print("{:<10}{:>10.1f}{:>10.1f}{:>10.1f}{:>10.1f}\n", transports[t].name,
               pick(t, &Percentiles::p50), pick(t, &Percentiles::p90), pick(t, &Percentiles::p99),
               pick(t, &Percentiles::max));
  }
  // The runtime spins on both ends (the live rank while it waits for an
  // answer, the coordinator while ranks are connected): the target is judged
  // on unix+spin.
  fmt::print("target: unix+spin p50 <= 20 us: {}\n",
             pick(2, &Percentiles::p50) <= 20 ? "PASS" : "FAIL");
  return 0;
}

}  // namespace
}  // namespace prism::wire

int main(int argc, char** argv) {
  return prism::wire::main_impl(argc, argv);
}
