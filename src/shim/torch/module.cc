// prism_torch._c10d: the Python face of the backend. prism_torch registers
// create_group as the creator of the "prism" backend; marker and shutdown
// serve its optimizer hook and its atexit goodbye. Every function that may
// block, or take the Session's lock, releases the GIL first: the progress
// thread completes futures whose Python callbacks need it.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "shim/torch/backend.h"
#include "shim/torch/session.h"

namespace prism::torch_shim {

namespace {

// $NAME as an int, or `fallback` when unset.
std::int32_t env_rank(const char* name, std::int32_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  try {
    return static_cast<std::int32_t>(std::stoi(v));
  } catch (const std::exception&) {
    throw std::runtime_error(std::string("prism: $") + name + " is '" + v + "', not a number");
  }
}

// Who this process is: the launcher's RANK and WORLD_SIZE. A program that
// passes rank and world_size to init_process_group instead gives them with
// the default group (global_ranks empty), and they must agree.
Identity identity(int rank, int size, bool default_group) {
  Identity who;
  who.rank = env_rank("RANK", default_group ? rank : -1);
  who.world_size = env_rank("WORLD_SIZE", default_group ? size : -1);
  who.local_rank = env_rank("LOCAL_RANK", 0);
  if (who.rank < 0 || who.world_size < 1) {
    throw std::runtime_error(
        "prism: RANK and WORLD_SIZE are not set, and the first process group is not the "
        "default one: create it with init_process_group first");
  }
  if (default_group && (who.rank != rank || who.world_size != size)) {
    throw std::runtime_error("prism: init_process_group(rank=" + std::to_string(rank) +
                             ", world_size=" + std::to_string(size) +
                             ") disagrees with PrismLLM, which started this process as RANK " +
                             std::to_string(who.rank) + " of WORLD_SIZE " +
                             std::to_string(who.world_size));
  }
  return who;
}

c10::intrusive_ptr<BackendBase> create_group(int rank, int size,
                                             const std::vector<std::int64_t>& global_ranks) {
  const bool default_group = global_ranks.empty();
  Session& session = Session::get();
  session.connect(identity(rank, size, default_group));
  std::vector<std::int32_t> members;
  if (default_group) {
    for (int r = 0; r < size; ++r) members.push_back(r);
  } else {
    if (static_cast<int>(global_ranks.size()) != size) {
      throw std::runtime_error("prism: a process group of " + std::to_string(size) +
                               " ranks lists " + std::to_string(global_ranks.size()));
    }
    for (std::int64_t r : global_ranks) members.push_back(static_cast<std::int32_t>(r));
  }
  const std::uint32_t comm = session.comm_init(size, rank, members);
  return c10::make_intrusive<PrismBackend>(rank, size, comm);
}

}  // namespace
}  // namespace prism::torch_shim

namespace py = pybind11;
using prism::torch_shim::Session;

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "PrismLLM's torch.distributed backend 'prism' (docs/torch-backend.md)";
  m.def("create_group", &prism::torch_shim::create_group, py::arg("rank"), py::arg("size"),
        py::arg("global_ranks"), py::call_guard<py::gil_scoped_release>(),
        "Connects at the first call, declares the group to the coordinator and returns its "
        "process group. global_ranks: the group's members in group order, empty for the "
        "default group.");
  m.def(
      "marker", [](int code, std::int32_t value) { return Session::get().marker(code, value); },
      py::arg("code"), py::arg("value") = 0, py::call_guard<py::gil_scoped_release>(),
      "Sends an iteration marker (0 begin, 1 end, 2 micro-batch, 3 phase); False when no "
      "process group exists yet.");
  m.def(
      "shutdown", [](int exit_code) { Session::get().shutdown(exit_code, true); },
      py::arg("exit_code") = 0, py::call_guard<py::gil_scoped_release>(),
      "Says goodbye to the coordinator, once; later collectives fail.");
  m.def(
      "connected", [] { return Session::get().connected(); },
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "now", [] { return Session::get().now(); }, py::call_guard<py::gil_scoped_release>(),
      "The rank's virtual time in ns (prism_now); 0 before the first process group.");
  m.def(
      "stats",
      [] {
        prism_stats s{};
        {
          py::gil_scoped_release release;
          s = Session::get().stats();
        }
        py::dict d;
        d["messages"] = s.messages;
        d["overhead_ns"] = s.overhead_ns;
        d["late_ns"] = s.late_ns;
        return d;
      },
      "The client's messages sent, the real time they took, and the real time dropped from "
      "virtual time because answers came late (prism_get_stats).");
}
