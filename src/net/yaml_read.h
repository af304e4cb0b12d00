// Small helpers shared by the YAML readers (cluster specs, job specs): where a
// node sits in its file, and one scalar of a given type with a readable error.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "util/status.h"

namespace prism::yaml {

// "FILE:LINE:COL", or just the source when the mark is unknown.
inline std::string where(std::string_view source, const YAML::Mark& m) {
  if (m.line < 0) return std::string(source);
  return fmt::format("{}:{}:{}", source, m.line + 1, m.column + 1);
}

// What a yaml-cpp exception says is wrong, in our words (never the
// library's text); the place is the caller's (where(source, e.mark)).
std::string problem(const YAML::Exception& e);

// The YAML document in file `path`. A device or pipe (/dev/zero) is refused,
// not read without end. Errors: "<access_prefix><path>: not a regular file",
// "<access_prefix>" + read_file()'s message, or, for text that is not YAML,
// "<path>:<line>:<col>: malformed YAML: <problem>".
Result<YAML::Node> load_yaml_file(const std::string& path, std::string_view access_prefix = "");

// The scalar `n` as a T; `type` names T in errors ("an integer").
template <typename T>
Result<T> scalar(const YAML::Node& n, std::string_view type) {
  if (!n.IsScalar()) return Status::invalid_argument(fmt::format("expected {}", type));
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    return Status::invalid_argument(fmt::format("expected {} (got \"{}\")", type, n.Scalar()));
  }
}

}  // namespace prism::yaml
