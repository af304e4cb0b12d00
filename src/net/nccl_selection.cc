// NCCL_ALGO / NCCL_PROTO parsing (NcclSelection in net/nccl_tuner.h).
#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "net/nccl_tuner.h"
#include "util/enum_names.h"

namespace prism {
namespace {

constexpr std::array<std::pair<NcclAlgo, std::string_view>, kNumAlgos> kAlgoNames{{
    {NcclAlgo::kTree, "Tree"},
    {NcclAlgo::kRing, "Ring"},
    {NcclAlgo::kCollNetDirect, "CollnetDirect"},
    {NcclAlgo::kCollNetChain, "CollnetChain"},
    {NcclAlgo::kNvls, "NVLS"},
    {NcclAlgo::kNvlsTree, "NVLSTree"},
    {NcclAlgo::kPat, "PAT"},
}};
constexpr std::array<std::pair<NcclProto, std::string_view>, kNumProtos> kProtoNames{{
    {NcclProto::kLL, "LL"},
    {NcclProto::kLL128, "LL128"},
    {NcclProto::kSimple, "Simple"},
}};
constexpr std::array<std::pair<NcclFunc, std::string_view>, kNumFuncs> kFuncNames{{
    {NcclFunc::kBroadcast, "broadcast"},
    {NcclFunc::kReduce, "reduce"},
    {NcclFunc::kAllGather, "allgather"},
    {NcclFunc::kReduceScatter, "reducescatter"},
    {NcclFunc::kAllReduce, "allreduce"},
}};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const std::size_t at = s.find(sep);
    parts.push_back(trim(s.substr(0, at)));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

template <typename E, std::size_t N>
std::string all_names(const std::array<std::pair<E, std::string_view>, N>& table) {
  std::vector<std::string_view> names;
  for (const auto& [e, name] : table) names.push_back(name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// Parses one list ("Ring,Tree" or "^LL128") into a mask.
template <typename E, std::size_t N>
Result<std::array<bool, N>> parse_list(std::string_view var, std::string_view list,
                                       const std::array<std::pair<E, std::string_view>, N>& table) {
  std::array<bool, N> mask{};
  const bool exclude = !list.empty() && list.front() == '^';
  if (exclude) list.remove_prefix(1);
  mask.fill(exclude);
  for (std::string_view item : split(list, ',')) {
    if (item.empty())
      return Status::invalid_argument(fmt::format("{}: empty name in \"{}\"", var, list));
    bool found = false;
    for (std::size_t i = 0; i < N; ++i) {
      if (lower(table[i].second) == lower(item)) {
        mask[i] = !exclude;
        found = true;
      }
    }
    if (!found)
      return Status::invalid_argument(
          fmt::format("{}: unknown name \"{}\" (names: {})", var, item, all_names(table)));
  }
  return mask;
}

// "list" for every function, or "func:list;func:list" for the named ones.
template <typename E, std::size_t N>
Status parse_var(std::string_view var, std::string_view text,
                 const std::array<std::pair<E, std::string_view>, N>& table,
                 std::array<std::array<bool, N>, kNumFuncs>* masks) {
  text = trim(text);
  if (text.empty()) return Status::ok();
  if (text.find(':') == std::string_view::npos) {
    PRISM_ASSIGN_OR_RETURN(const auto mask, parse_list(var, text, table));
    masks->fill(mask);
    return Status::ok();
  }
  for (std::string_view clause : split(text, ';')) {
    if (clause.empty()) continue;
    const std::size_t colon = clause.find(':');
    if (colon == std::string_view::npos)
      return Status::invalid_argument(fmt::format(
          "{}: \"{}\" needs a collective (e.g. allreduce:{})", var, clause, table[0].second));
    const std::string func = lower(trim(clause.substr(0, colon)));
    const auto f = internal::parse_enum(func, kFuncNames);
    if (!f)
      return Status::invalid_argument(fmt::format("{}: unknown collective \"{}\" (collectives: {})",
                                                  var, func, all_names(kFuncNames)));
    PRISM_ASSIGN_OR_RETURN((*masks)[static_cast<int>(*f)],
                           parse_list(var, trim(clause.substr(colon + 1)), table));
  }
  return Status::ok();
}

}  // namespace

std::string_view to_string(NcclAlgo a) {
  if (a == NcclAlgo::kP2p) return "P2P";
  return internal::enum_name(a, kAlgoNames);
}
std::string_view to_string(NcclProto p) {
  return internal::enum_name(p, kProtoNames);
}

NcclSelection::NcclSelection() {
  for (auto& m : algo_) m.fill(true);
  for (auto& m : proto_) m.fill(true);
}

Result<NcclSelection> NcclSelection::parse(std::string_view algo, std::string_view proto) {
  NcclSelection s;
  PRISM_RETURN_IF_ERROR(parse_var("NCCL_ALGO", algo, kAlgoNames, &s.algo_));
  PRISM_RETURN_IF_ERROR(parse_var("NCCL_PROTO", proto, kProtoNames, &s.proto_));
  return s;
}

}  // namespace prism
