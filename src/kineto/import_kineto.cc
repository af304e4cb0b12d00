// Entry points: one trace -> one rank's program; a set of traces -> a graph.
#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "graph/rank_list.h"
#include "kineto/convert.h"
#include "kineto/kineto.h"
#include "util/file.h"

namespace prism {
namespace {

Result<KinetoTrace> convert(const kineto::ParsedTrace& t, const KinetoTraceOptions& options) {
  const std::string& source = t.source;
  KinetoTrace out;
  out.world_size = options.world_size.value_or(t.dist.world_size.value_or(1));
  const Rank rank = options.rank.value_or(t.dist.rank.value_or(0));
  if (out.world_size < 1) {
    return Status::invalid_argument(
        fmt::format("{}: world size {}; must be >= 1", source, out.world_size));
  }
  if (rank < 0 || rank >= out.world_size) {
    return Status::invalid_argument(
        fmt::format("{}: rank {} is outside the world of {} ranks", source, rank, out.world_size));
  }
  const kineto::CommContext ctx{rank, out.world_size, &t.dist};
  if (kineto::has_device_activity(t)) {
    PRISM_RETURN_IF_ERROR(kineto::device_program(t, ctx, options, &out));
  } else {
    PRISM_RETURN_IF_ERROR(kineto::host_program(t, ctx, options, &out));
  }
  return out;
}

// One world size, each rank of it exactly once.
Status check_coverage(const std::vector<std::filesystem::path>& files,
                      const std::vector<KinetoTrace>& traces) {
  const int world = traces.front().world_size;
  std::map<Rank, std::size_t> file_of;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    if (traces[i].world_size != world) {
      return Status::invalid_argument(fmt::format("{}: world size {}, but {} has {}",
                                                  files[i].string(), traces[i].world_size,
                                                  files[0].string(), world));
    }
    const Rank r = traces[i].program.rank;
    const auto [it, added] = file_of.try_emplace(r, i);
    if (!added) {
      return Status::invalid_argument(fmt::format(
          "{}: rank {} again (already from {})", files[i].string(), r, files[it->second].string()));
    }
  }
  std::vector<Rank> missing;
  for (Rank r = 0; r < world; ++r)
    if (!file_of.contains(r)) missing.push_back(r);
  if (!missing.empty()) {
    return Status::invalid_argument(
        fmt::format("import_kineto: no trace for rank{} {} of the world of {} ({} traces given)",
                    missing.size() > 1 ? "s" : "", format_rank_list(missing), world, files.size()));
  }
  return Status::ok();
}

}  // namespace

Result<KinetoTrace> parse_kineto_trace(std::string_view text, const std::string& source,
                                       const KinetoTraceOptions& options) {
  PRISM_ASSIGN_OR_RETURN(const kineto::ParsedTrace t, kineto::parse_trace(text, source));
  return convert(t, options);
}

Result<KinetoTrace> kineto_trace_of(const kineto::ParsedTrace& trace,
                                    const KinetoTraceOptions& options) {
  return convert(trace, options);
}

Result<KinetoTrace> load_kineto_trace(const std::filesystem::path& path,
                                      const KinetoTraceOptions& options) {
  PRISM_ASSIGN_OR_RETURN(const std::string text, read_file(path.string()));
  return parse_kineto_trace(text, path.string(), options);
}

Result<ExecutionGraph> import_kineto(const std::vector<std::filesystem::path>& files,
                                     const KinetoImportOptions& options) {
  if (files.empty()) return Status::invalid_argument("import_kineto: no trace files");
  if (options.gpus_per_node < 1) {
    return Status::invalid_argument(
        fmt::format("import_kineto: gpus_per_node {}; must be >= 1", options.gpus_per_node));
  }
  // Ranks come from every trace's distributedInfo, or from the file order
  // when none has one; a mix would leave some ranks to guesswork.
  std::vector<KinetoTrace> traces;
  bool first_has_info = false;
  for (std::size_t i = 0; i < files.size(); ++i) {
    PRISM_ASSIGN_OR_RETURN(const std::string text, read_file(files[i].string()));
    PRISM_ASSIGN_OR_RETURN(const kineto::ParsedTrace parsed,
                           kineto::parse_trace(text, files[i].string()));
    const bool has_info = parsed.dist.rank.has_value() && parsed.dist.world_size.has_value();
    if (i == 0) first_has_info = has_info;
    if (has_info != first_has_info) {
      return Status::invalid_argument(fmt::format(
          "{}: {} distributedInfo (rank, world_size), but {} {}; give every trace its rank or "
          "none (then the files are ranks 0..N-1 in order)",
          files[i].string(), has_info ? "has" : "no", files[0].string(),
          first_has_info ? "has one" : "has none"));
    }
    KinetoTraceOptions o;
    o.memory = options.memory;
    if (!has_info) {
      o.rank = static_cast<Rank>(i);
      o.world_size = static_cast<int>(files.size());
    }
    PRISM_ASSIGN_OR_RETURN(KinetoTrace t, convert(parsed, o));
    traces.push_back(std::move(t));
  }
  PRISM_RETURN_IF_ERROR(check_coverage(files, traces));
  const int world = traces.front().world_size;
  std::vector<RankProgram> programs;
  for (KinetoTrace& t : traces) programs.push_back(std::move(t.program));
  Layout layout(world, {GridDim{"rank", world}}, options.gpus_per_node);
  return assemble_graph(options.name, std::move(layout), std::move(programs));
}

}  // namespace prism
