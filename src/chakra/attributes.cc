#include "chakra/attributes.h"

#include <array>
#include <limits>
#include <utility>

#include <fmt/format.h>

namespace prism::chakra {
namespace {

using ChakraProtoMsg::AttributeProto;

constexpr std::array<std::pair<CollectiveKind, ChakraProtoMsg::CollectiveCommType>, 7> kCommTypes{{
    {CollectiveKind::kAllReduce, ChakraProtoMsg::ALL_REDUCE},
    {CollectiveKind::kAllGather, ChakraProtoMsg::ALL_GATHER},
    {CollectiveKind::kReduceScatter, ChakraProtoMsg::REDUCE_SCATTER},
    {CollectiveKind::kBroadcast, ChakraProtoMsg::BROADCAST},
    {CollectiveKind::kReduce, ChakraProtoMsg::REDUCE},
    {CollectiveKind::kAllToAll, ChakraProtoMsg::ALL_TO_ALL},
    {CollectiveKind::kBarrier, ChakraProtoMsg::BARRIER},
}};

AttributeProto* add(Attrs* attrs, std::string_view name) {
  AttributeProto* a = attrs->Add();
  a->set_name(std::string(name));
  return a;
}

Status wrong_type(const Place& where, std::string_view name, const char* wanted) {
  return Status::invalid_argument(
      fmt::format("{}: attribute '{}' is not {}", where.str(), name, wanted));
}

template <typename List>
std::vector<std::int64_t> widen(const List& list) {
  return std::vector<std::int64_t>(list.values().begin(), list.values().end());
}

}  // namespace

ChakraProtoMsg::CollectiveCommType comm_type_of(CollectiveKind k) {
  for (const auto& [kind, type] : kCommTypes)
    if (kind == k) return type;
  return ChakraProtoMsg::ALL_REDUCE;
}

std::optional<CollectiveKind> collective_of(std::int64_t comm_type) {
  if (comm_type == ChakraProtoMsg::REDUCE_SCATTER_BLOCK) return CollectiveKind::kReduceScatter;
  for (const auto& [kind, type] : kCommTypes)
    if (type == comm_type) return kind;
  return std::nullopt;
}

std::string Place::str() const {
  return node_ ? fmt::format("{}: node {}", text_, *node_) : std::string(text_);
}

void add_bool(Attrs* attrs, std::string_view name, bool v) {
  add(attrs, name)->set_bool_val(v);
}
void add_int(Attrs* attrs, std::string_view name, std::int64_t v) {
  add(attrs, name)->set_int64_val(v);
}
void add_double(Attrs* attrs, std::string_view name, double v) {
  add(attrs, name)->set_double_val(v);
}
void add_string(Attrs* attrs, std::string_view name, std::string_view v) {
  add(attrs, name)->set_string_val(std::string(v));
}
void add_int_list(Attrs* attrs, std::string_view name, const std::vector<std::int64_t>& v) {
  auto* list = add(attrs, name)->mutable_int64_list();
  for (std::int64_t x : v) list->add_values(x);
}
void add_string_list(Attrs* attrs, std::string_view name, const std::vector<std::string>& v) {
  auto* list = add(attrs, name)->mutable_string_list();
  for (const std::string& x : v) list->add_values(x);
}

const AttributeProto* find_attr(const Attrs& attrs, std::string_view name) {
  for (const AttributeProto& a : attrs)
    if (a.name() == name) return &a;
  return nullptr;
}

Result<std::optional<std::int64_t>> int_attr(const Attrs& attrs, std::string_view name,
                                             const Place& where) {
  const AttributeProto* a = find_attr(attrs, name);
  if (a == nullptr) return std::optional<std::int64_t>();
  switch (a->value_case()) {
    case AttributeProto::kInt32Val:
      return std::optional<std::int64_t>(a->int32_val());
    case AttributeProto::kInt64Val:
      return std::optional<std::int64_t>(a->int64_val());
    case AttributeProto::kUint32Val:
      return std::optional<std::int64_t>(a->uint32_val());
    case AttributeProto::kSint32Val:
      return std::optional<std::int64_t>(a->sint32_val());
    case AttributeProto::kSint64Val:
      return std::optional<std::int64_t>(a->sint64_val());
    case AttributeProto::kFixed32Val:
      return std::optional<std::int64_t>(a->fixed32_val());
    case AttributeProto::kSfixed32Val:
      return std::optional<std::int64_t>(a->sfixed32_val());
    case AttributeProto::kSfixed64Val:
      return std::optional<std::int64_t>(a->sfixed64_val());
    case AttributeProto::kBoolVal:
      return std::optional<std::int64_t>(a->bool_val() ? 1 : 0);
    case AttributeProto::kUint64Val:
    case AttributeProto::kFixed64Val: {
      const std::uint64_t v =
          a->value_case() == AttributeProto::kUint64Val ? a->uint64_val() : a->fixed64_val();
      if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return Status::invalid_argument(
            fmt::format("{}: attribute '{}' is {}, past 2^63", where.str(), name, v));
      }
      return std::optional<std::int64_t>(static_cast<std::int64_t>(v));
    }
    default:
      return wrong_type(where, name, "an integer");
  }
}

Result<std::optional<double>> double_attr(const Attrs& attrs, std::string_view name,
                                          const Place& where) {
  const AttributeProto* a = find_attr(attrs, name);
  if (a == nullptr) return std::optional<double>();
  if (a->value_case() == AttributeProto::kDoubleVal) return std::optional<double>(a->double_val());
  if (a->value_case() == AttributeProto::kFloatVal) return std::optional<double>(a->float_val());
  PRISM_ASSIGN_OR_RETURN(const std::optional<std::int64_t> i, int_attr(attrs, name, where));
  return std::optional<double>(static_cast<double>(*i));
}

Result<std::optional<std::string>> string_attr(const Attrs& attrs, std::string_view name,
                                               const Place& where) {
  const AttributeProto* a = find_attr(attrs, name);
  if (a == nullptr) return std::optional<std::string>();
  if (a->value_case() != AttributeProto::kStringVal) return wrong_type(where, name, "a string");
  return std::optional<std::string>(a->string_val());
}

Result<std::optional<std::vector<std::int64_t>>> int_list_attr(const Attrs& attrs,
                                                               std::string_view name,
                                                               const Place& where) {
  using Out = std::optional<std::vector<std::int64_t>>;
  const AttributeProto* a = find_attr(attrs, name);
  if (a == nullptr) return Out();
  switch (a->value_case()) {
    case AttributeProto::kInt32List:
      return Out(widen(a->int32_list()));
    case AttributeProto::kInt64List:
      return Out(widen(a->int64_list()));
    case AttributeProto::kUint32List:
      return Out(widen(a->uint32_list()));
    case AttributeProto::kSint32List:
      return Out(widen(a->sint32_list()));
    case AttributeProto::kSint64List:
      return Out(widen(a->sint64_list()));
    default:
      return wrong_type(where, name, "a list of integers");
  }
}

Result<std::optional<std::vector<std::string>>> string_list_attr(const Attrs& attrs,
                                                                 std::string_view name,
                                                                 const Place& where) {
  using Out = std::optional<std::vector<std::string>>;
  const AttributeProto* a = find_attr(attrs, name);
  if (a == nullptr) return Out();
  if (a->value_case() != AttributeProto::kStringList)
    return wrong_type(where, name, "a list of strings");
  return Out(
      std::vector<std::string>(a->string_list().values().begin(), a->string_list().values().end()));
}

}  // namespace prism::chakra
