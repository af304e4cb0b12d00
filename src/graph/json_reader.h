// Helpers for reading the graph file (graph_json_*.cc); internal to
// src/graph, not part of the graph API.
//
// Every reader takes the JSON path of what it reads, so that each rejection
// names the place ("/roles/1/ops/7/bytes: ..."). Paths are chains of
// JsonPath objects on the stack, rendered to text only when an error is
// reported, which keeps the loader fast on files with 100,000s of ops. A
// JsonPath points to its parent: keep the parent alive (a named local), never
// a temporary.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace prism::graph_json {

using Json = nlohmann::ordered_json;

inline constexpr std::string_view kFormatName = "prism-graph";

class JsonPath {
 public:
  JsonPath() = default;
  JsonPath field(std::string_view key) const { return JsonPath(this, key, -1); }
  JsonPath item(std::size_t index) const {
    return JsonPath(this, {}, static_cast<std::int64_t>(index));
  }
  // JSON-pointer style: "/roles/1/ops/7"; "/" for the document root.
  std::string str() const;
  // invalid_argument("<path>: <msg>").
  Status error(std::string_view msg) const;

 private:
  JsonPath(const JsonPath* parent, std::string_view key, std::int64_t index)
      : parent_(parent), key_(key), index_(index) {}
  void append_to(std::string* out) const;

  const JsonPath* parent_ = nullptr;
  std::string_view key_;
  std::int64_t index_ = -1;
};

// Parses `text` into `*doc` as Json::parse does, throwing the same exceptions
// on malformed text, but rejects a key that appears twice in one object
// (Json::parse silently keeps the last) with the object's path:
// "/roles/0/ops/3: duplicate field \"duration_ns\"".
Status parse_document(std::string_view text, Json* doc);

// Fails unless `j` is an object.
Status expect_object(const Json& j, const JsonPath& path);
// Fails unless `j` is an array.
Status expect_array(const Json& j, const JsonPath& path);
// Fails unless `j` is an object whose every key is in `allowed`.
Status check_fields(const Json& j, const JsonPath& path,
                    std::initializer_list<std::string_view> allowed);
// The member `key` of object `obj`, or nullptr.
const Json* find_field(const Json& obj, std::string_view key);
// The member `key`, or an error naming it as missing.
Result<const Json*> require_field(const Json& obj, std::string_view key, const JsonPath& path);

// Reads `value` (at `path`) as an integer in [lo, hi]; floats, strings and
// out-of-range values are rejected.
Result<std::int64_t> as_int(const Json& value, const JsonPath& path, std::int64_t lo,
                            std::int64_t hi);
Result<double> as_number(const Json& value, const JsonPath& path);
Result<std::string> as_string(const Json& value, const JsonPath& path);
Result<bool> as_bool(const Json& value, const JsonPath& path);

// Member readers: `obj` is an object at `path`; the error names path/key.
Result<std::int64_t> get_int(const Json& obj, std::string_view key, const JsonPath& path,
                             std::int64_t lo, std::int64_t hi);
Result<std::int64_t> get_int_or(const Json& obj, std::string_view key, const JsonPath& path,
                                std::int64_t lo, std::int64_t hi, std::int64_t fallback);
Result<std::string> get_string(const Json& obj, std::string_view key, const JsonPath& path);
Result<std::string> get_string_or(const Json& obj, std::string_view key, const JsonPath& path,
                                  std::string fallback);

// "a, b, c": every name of an enum whose values run from 0 and whose
// to_string() answers "?" past the last one (util/enum_names.h).
template <typename E>
std::string enum_choices() {
  std::string out;
  for (int i = 0; i < 256; ++i) {
    const std::string_view name = to_string(static_cast<E>(i));
    if (name == "?") break;
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// Reads member `key` as a name of enum E through `parse`; an unknown name is
// rejected with the list of valid ones. `what` names the vocabulary
// ("collective", "dtype").
template <typename E, typename Parse>
Result<E> get_enum(const Json& obj, std::string_view key, const JsonPath& path,
                   std::string_view what, Parse parse, std::optional<E> fallback = std::nullopt) {
  const JsonPath at = path.field(key);
  const Json* v = find_field(obj, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return path.error("missing required field \"" + std::string(key) + "\"");
  }
  PRISM_ASSIGN_OR_RETURN(std::string name, as_string(*v, at));
  std::optional<E> e = parse(name);
  if (!e) {
    return at.error("unknown " + std::string(what) + " \"" + name +
                    "\" (valid: " + enum_choices<E>() + ")");
  }
  return *e;
}

}  // namespace prism::graph_json
