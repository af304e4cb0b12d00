#include "graph/json_reader.h"

#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace prism::graph_json {
namespace {

std::string_view type_name(const Json& j) {
  if (j.is_number_float()) return "a float";
  if (j.is_number()) return "an integer";
  switch (j.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    default:
      return "a value of another type";
  }
}

Status wrong_type(const Json& j, const JsonPath& path, std::string_view expected) {
  return path.error(fmt::format("expected {}, got {}", expected, type_name(j)));
}

// The SAX handler behind parse_document(): builds the document as
// Json::parse does, and stops at the first duplicate key. Json is an
// ordered_json, whose objects keep their members in insertion order, so the
// last member of each open object is the one being read: that gives the path.
class DocumentBuilder {
 public:
  explicit DocumentBuilder(Json* root) : root_(root) {}

  bool null() { return add(nullptr); }
  bool boolean(bool v) { return add(v); }
  bool number_integer(Json::number_integer_t v) { return add(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return add(v); }
  bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) { return add(v); }
  bool string(Json::string_t& v) { return add(std::move(v)); }
  bool binary(Json::binary_t& v) { return add(std::move(v)); }
  bool start_object(std::size_t /*size*/) { return open(Json::value_t::object); }
  bool start_array(std::size_t /*size*/) { return open(Json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(Json::string_t& k) {
    auto [it, inserted] = open_.back()->get_ref<Json::object_t&>().emplace(k, nullptr);
    if (!inserted) {
      duplicate_ = k;
      return false;  // stops the parser
    }
    member_ = &it->second;
    return true;
  }
  // Every failure leaves as a Json::parse_error, which carries the byte
  // position the caller turns into line:column; nlohmann reports a number
  // too large for a double (1e400) as out_of_range, without one.
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    if constexpr (std::is_same_v<Exception, Json::parse_error>) {
      throw e;
    } else {
      throw Json::parse_error::create(101, position,
                                      fmt::format("number out of range: '{}'", token), nullptr);
    }
  }

  static constexpr std::size_t kMaxDepth = 64;

  // Why the parse stopped: "/roles/0/ops/3: duplicate field "x"", or nesting.
  std::string stop_error() const {
    if (too_deep_) return fmt::format("values nested deeper than {} levels", kMaxDepth);
    return duplicate_error();
  }

  // "/roles/0/ops/3: duplicate field "x"" after a duplicate stopped the parse.
  std::string duplicate_error() const {
    std::string path;
    for (std::size_t i = 0; i + 1 < open_.size(); ++i) {
      const Json& c = *open_[i];
      path += '/';
      path += c.is_array() ? std::to_string(c.size() - 1)
                           : c.get_ref<const Json::object_t&>().back().first;
    }
    return fmt::format("{}: duplicate field \"{}\"", path.empty() ? "/" : path, duplicate_);
  }

 private:
  template <typename V>
  Json* place(V&& v) {
    if (open_.empty()) {
      *root_ = Json(std::forward<V>(v));
      return root_;
    }
    if (open_.back()->is_array()) {
      auto& array = open_.back()->get_ref<Json::array_t&>();
      array.emplace_back(std::forward<V>(v));
      return &array.back();
    }
    *member_ = Json(std::forward<V>(v));
    return member_;
  }
  template <typename V>
  bool add(V&& v) {
    place(std::forward<V>(v));
    return true;
  }
  bool open(Json::value_t type) {
    // A graph nests a handful of levels; hostile nesting would only exhaust
    // the stack (copying or destroying a deep value recurses).
    if (open_.size() >= kMaxDepth) {
      too_deep_ = true;
      return false;  // stops the parser
    }
    open_.push_back(place(type));
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  Json* root_;
  std::vector<Json*> open_;  // the open arrays and objects, outermost first
  Json* member_ = nullptr;   // the member of the innermost object being read
  std::string duplicate_;
  bool too_deep_ = false;
};

}  // namespace

Status parse_document(std::string_view text, Json* doc) {
  DocumentBuilder builder(doc);
  if (Json::sax_parse(text.begin(), text.end(), &builder)) return Status::ok();
  return Status::invalid_argument(builder.stop_error());
}

void JsonPath::append_to(std::string* out) const {
  if (parent_ == nullptr) return;
  parent_->append_to(out);
  *out += '/';
  if (index_ >= 0) {
    *out += std::to_string(index_);
  } else {
    *out += key_;
  }
}

std::string JsonPath::str() const {
  std::string out;
  append_to(&out);
  return out.empty() ? "/" : out;
}

Status JsonPath::error(std::string_view msg) const {
  return Status::invalid_argument(str() + ": " + std::string(msg));
}

Status expect_object(const Json& j, const JsonPath& path) {
  return j.is_object() ? Status::ok() : wrong_type(j, path, "an object");
}

Status expect_array(const Json& j, const JsonPath& path) {
  return j.is_array() ? Status::ok() : wrong_type(j, path, "an array");
}

Status check_fields(const Json& j, const JsonPath& path,
                    std::initializer_list<std::string_view> allowed) {
  PRISM_RETURN_IF_ERROR(expect_object(j, path));
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || a == key;
    if (!known) return path.error(fmt::format("unknown field \"{}\"", key));
  }
  return Status::ok();
}

const Json* find_field(const Json& obj, std::string_view key) {
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (it.key() == key) return &it.value();
  return nullptr;
}

Result<const Json*> require_field(const Json& obj, std::string_view key, const JsonPath& path) {
  const Json* v = find_field(obj, key);
  if (v == nullptr) return path.error(fmt::format("missing required field \"{}\"", key));
  return v;
}

Result<std::int64_t> as_int(const Json& value, const JsonPath& path, std::int64_t lo,
                            std::int64_t hi) {
  std::int64_t v = 0;
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return path.error(fmt::format("{} is out of range [{}, {}]", u, lo, hi));
    v = static_cast<std::int64_t>(u);
  } else if (value.is_number_integer()) {
    v = value.get<std::int64_t>();
  } else {
    return wrong_type(value, path, lo >= 0 ? "a non-negative integer" : "an integer");
  }
  if (v < lo || v > hi) {
    if (lo == 0 && v < 0) return path.error(fmt::format("must not be negative, got {}", v));
    return path.error(fmt::format("{} is out of range [{}, {}]", v, lo, hi));
  }
  return v;
}

Result<double> as_number(const Json& value, const JsonPath& path) {
  if (!value.is_number()) return wrong_type(value, path, "a number");
  return value.get<double>();
}

Result<std::string> as_string(const Json& value, const JsonPath& path) {
  if (!value.is_string()) return wrong_type(value, path, "a string");
  return value.get<std::string>();
}

Result<bool> as_bool(const Json& value, const JsonPath& path) {
  if (!value.is_boolean()) return wrong_type(value, path, "true or false");
  return value.get<bool>();
}

Result<std::int64_t> get_int(const Json& obj, std::string_view key, const JsonPath& path,
                             std::int64_t lo, std::int64_t hi) {
  PRISM_ASSIGN_OR_RETURN(const Json* v, require_field(obj, key, path));
  return as_int(*v, path.field(key), lo, hi);
}

Result<std::int64_t> get_int_or(const Json& obj, std::string_view key, const JsonPath& path,
                                std::int64_t lo, std::int64_t hi, std::int64_t fallback) {
  const Json* v = find_field(obj, key);
  if (v == nullptr) return fallback;
  return as_int(*v, path.field(key), lo, hi);
}

Result<std::string> get_string(const Json& obj, std::string_view key, const JsonPath& path) {
  PRISM_ASSIGN_OR_RETURN(const Json* v, require_field(obj, key, path));
  return as_string(*v, path.field(key));
}

Result<std::string> get_string_or(const Json& obj, std::string_view key, const JsonPath& path,
                                  std::string fallback) {
  const Json* v = find_field(obj, key);
  if (v == nullptr) return fallback;
  return as_string(*v, path.field(key));
}

}  // namespace prism::graph_json
