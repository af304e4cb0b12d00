// fuzz_make_seeds SOURCE_DIR OUT_DIR: writes the seeds of the binary and
// generated formats into OUT_DIR/<target>/, made by the project's own writers
// so that they stay valid as the formats change (docs/fuzzing.md). The text
// seeds taken from the tests are in fuzz/corpus/ instead.
//
//   wire_frames   one frame of every message type, and all of them in a row
//   tcpstore      every query of both dialects, and a connection of each
//   chakra_et     the ET files (and groups) of examples/graphs/gpt_tp2_pp2_dp2.json
//   capture_file  a capture holding one of every message
//   graph_json    examples/graphs/gpt_tp2_pp2_dp2.json with captured objects
//   cluster_yaml  every cluster preset, formatted
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "chakra/chakra.h"
#include "chakra/et_file.h"
#include "graph/graph_json.h"
#include "net/cluster_spec.h"
#include "net/cluster_yaml.h"
#include "runtime/tcpstore_protocol.h"
#include "slicing/capture_file.h"
#include "slicing/graph_objects.h"
#include "util/file.h"
#include "wire/protocol.h"

namespace fs = std::filesystem;
namespace ts = prism::runtime::tcpstore;

namespace {

void fail(const std::string& what) {
  std::fprintf(stderr, "error: fuzz_make_seeds: %s\n", what.c_str());
  std::exit(1);
}

void write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary);
  out << bytes;
  if (!out) fail("cannot write " + (dir / name).string());
}

// One of every message, with most fields set.
std::vector<prism::wire::Message> every_message() {
  namespace wire = prism::wire;
  wire::Op op;
  op.op_id = 7;
  op.comm = 1;
  op.stream = 2;
  op.code = wire::OpCode::kSend;
  op.dtype = prism::DType::kFloat32;
  op.bytes = 4096;
  op.peer = 1;
  op.tag = 5;
  op.group = 9;
  op.at = 100;
  return {
      wire::Hello{3, 8, 0, 42, "train.py"},
      wire::Welcome{3, 8, 10, "ddp"},
      wire::CommInit{1, 8, 3, 99, {0, 1, 2, 3, 4, 5, 6, 7}},
      wire::CommSplit{1, 2, 0, 3},
      wire::CommInfo{2, 1, {2, 3}},
      op,
      wire::Complete{7, 120, 1 << 20},
      wire::Wait{4, 7, 1, 130, 500},
      wire::Horizon{4, 500},
      wire::Memory{wire::MemoryAction::kAlloc, 0xdead, 1 << 20, 0, 600},
      wire::Memory{wire::MemoryAction::kFree, 0xdead, 1 << 20, 0, 700},
      wire::Marker{wire::MarkerCode::kPhase, 2, 800},
      wire::Compute{1, 900, 50, "gemm"},
      wire::Error{wire::ErrorCode::kRejected, "no"},
      wire::Bye{0, 1000},
  };
}

void wire_seeds(const fs::path& out) {
  const fs::path dir = out / "wire_frames";
  std::string all(1, '\0');  // first byte: the whole input in one piece
  std::uint32_t seq = 0;
  for (const prism::wire::Message& m : every_message()) {
    const std::string frame = prism::wire::encode(m, seq);
    write(dir, std::string(prism::wire::to_string(prism::wire::type_of(m))) + std::to_string(seq),
          std::string(1, '\0') + frame);
    all += frame;
    ++seq;
  }
  write(dir, "all", all);
  write(dir, "all_in_7_byte_pieces", std::string(1, '\7') + all.substr(1));
}

void tcpstore_seeds(const fs::path& out) {
  const fs::path dir = out / "tcpstore";
  const ts::Bytes value = ts::bytes_of("value");
  const std::vector<ts::Query> queries = {
      {ts::Op::kSet, {"k"}, {value}},
      {ts::Op::kCompareSet, {"k"}, {value, ts::bytes_of("new")}},
      {ts::Op::kGet, {"k"}},
      {ts::Op::kAdd, {"counter"}, {}, 5},
      {ts::Op::kCheck, {"a", "b"}},
      {ts::Op::kWait, {"a", "b"}},
      {ts::Op::kGetNumKeys},
      {ts::Op::kWatchKey, {"k"}},
      {ts::Op::kDeleteKey, {"k"}},
      {ts::Op::kAppend, {"k"}, {value}},
      {ts::Op::kMultiGet, {"a", "b"}},
      {ts::Op::kMultiSet, {"a", "b"}, {value, value}},
      {ts::Op::kCancelWait},
      {ts::Op::kPing, {}, {}, 0, 1234},
      {ts::Op::kQueuePush, {"q"}, {value}},
      {ts::Op::kQueuePop, {"q"}},
      {ts::Op::kQueueLen, {"q"}},
      {ts::Op::kList},
  };
  for (const ts::Dialect d : {ts::Dialect::kLegacy, ts::Dialect::kValidated}) {
    const std::string dialect = d == ts::Dialect::kLegacy ? "legacy" : "validated";
    ts::Bytes connection;
    if (d == ts::Dialect::kValidated)
      connection = ts::encode(d, ts::Query{ts::Op::kValidate, {}, {}, 0, ts::kValidationMagic});
    for (const ts::Query& q : queries) {
      if (ts::wire_type(d, q.op) < 0) continue;
      ts::Bytes one =
          d == ts::Dialect::kValidated
              ? ts::encode(d, ts::Query{ts::Op::kValidate, {}, {}, 0, ts::kValidationMagic})
              : ts::Bytes{};
      const ts::Bytes b = ts::encode(d, q);
      one.insert(one.end(), b.begin(), b.end());
      connection.insert(connection.end(), b.begin(), b.end());
      write(dir, dialect + "_" + std::string(ts::op_name(q.op)),
            std::string(one.begin(), one.end()));
    }
    write(dir, dialect + "_connection", std::string(connection.begin(), connection.end()));
  }
}

void chakra_seeds(const fs::path& source_dir, const fs::path& out) {
  const fs::path dir = out / "chakra_et";
  const auto g = prism::load_graph((source_dir / "examples/graphs/gpt_tp2_pp2_dp2.json").string());
  if (!g.is_ok()) fail(g.status().message());
  const fs::path et_dir = out / "chakra_et.export";
  const prism::Status s = prism::export_chakra(*g, et_dir);
  if (!s.is_ok()) fail(s.message());
  const auto groups =
      prism::read_file((et_dir / prism::chakra::comm_groups_file_name("workload")).string());
  if (!groups.is_ok()) fail(groups.status().message());
  const int world = g->layout.world_size();
  for (int r = 0; r < world && r < 8; ++r) {
    const auto et =
        prism::read_file((et_dir / prism::chakra::trace_file_name("workload", r)).string());
    if (!et.is_ok()) fail(et.status().message());
    const char head = static_cast<char>((world - 1) | (r << 4));
    write(dir, "rank" + std::to_string(r), std::string(1, head) + *et);
    write(dir, "rank" + std::to_string(r) + "_groups",
          std::string(1, static_cast<char>(head | 0x80)) + *groups + std::string(1, '\0') + *et);
  }
  fs::remove_all(et_dir);
}

void capture_seeds(const fs::path& out) {
  prism::RankCapture c{3, 8, 42, "train.py", "ddp", {}};
  int graph_op = 0;
  for (prism::wire::Message& m : every_message()) c.entries.push_back({std::move(m), graph_op++});
  write(out / "capture_file", "every_message.json", prism::format_capture_json(c));
}

// The example graph as `prism emulate --save-graph` keeps a captured
// program's: each stage's captured rank and what they sent.
void graph_seeds(const fs::path& source_dir, const fs::path& out) {
  const auto g = prism::load_graph((source_dir / "examples/graphs/gpt_tp2_pp2_dp2.json").string());
  if (!g.is_ok()) fail(g.status().message());
  const auto bytes = [](std::string_view s) {
    return std::vector<std::uint8_t>(s.begin(), s.end());
  };
  prism::GraphObjects o;
  o.captured = {0, 5};
  o.objects = {{"prism/object/0/group/0:1:8/0", bytes("PRISMOBJ config")},
               {"prism/object/0/to/4/0", bytes("meta")},
               {"prism/object/5/to/1/1", {}}};
  write(out / "graph_json", "captured_objects.json",
        prism::graph_to_json(*g, prism::graph_object_sections(*g, o)));
}

void cluster_seeds(const fs::path& out) {
  for (const std::string_view name : prism::cluster_preset_names()) {
    const auto c = prism::cluster_preset(name);
    if (!c.is_ok()) fail(c.status().message());
    write(out / "cluster_yaml", std::string(name) + ".yaml", prism::format_cluster_yaml(*c));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) fail("usage: fuzz_make_seeds SOURCE_DIR OUT_DIR");
  const fs::path source_dir = argv[1];
  const fs::path out = argv[2];
  wire_seeds(out);
  tcpstore_seeds(out);
  chakra_seeds(source_dir, out);
  capture_seeds(out);
  graph_seeds(source_dir, out);
  cluster_seeds(out);
  return 0;
}
