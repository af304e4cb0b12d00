#include "net/yaml_read.h"

#include <sys/stat.h>

#include <array>
#include <utility>

#include "util/file.h"

namespace prism::yaml {

// yaml-cpp's messages (yaml-cpp/exceptions.h, ErrorMsg) in our words; the
// ones that end in ": " carry the offending character after them.
std::string problem(const YAML::Exception& e) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 24> kWords{{
      {"end of map flow not found", "a '{' mapping is not closed with '}'"},
      {"end of sequence flow not found", "a '[' list is not closed with ']'"},
      {"end of map not found", "a mapping ends where it cannot (check the indentation)"},
      {"end of sequence not found", "a list ends where it cannot (check the indentation)"},
      {"illegal map value",
       "a ':' where no value can start (a 'key: value' inside a value: quote it or put it on "
       "its own line)"},
      {"illegal block entry", "a '- ' list item where no list can start"},
      {"illegal flow end", "a ']' or '}' that closes nothing"},
      {"illegal map key", "a '?' key where no key can start"},
      {"illegal tab when looking for indentation", "a tab in the indentation (indent with spaces)"},
      {"illegal EOF in scalar", "a quoted value is not closed before the end of the file"},
      {"illegal document indicator in scalar", "a '---' or '...' inside a quoted value"},
      {"illegal character in scalar", "a character a plain value cannot hold (quote the value)"},
      {"unknown escape character: ", "an unknown escape in a double-quoted value: \\"},
      {"invalid unicode: ", "an escape that is no Unicode character: "},
      {"bad character found while scanning hex number", "a bad hex digit in an escape"},
      {"unknown token", "a character nothing in YAML can start with"},
      {"alias not found after *", "a '*' without an alias name"},
      {"anchor not found after &", "a '&' without an anchor name"},
      {"the referenced anchor is not defined",
       "an alias whose '&' anchor is not defined before it"},
      {"cannot assign multiple", "a value with more than one tag, anchor or alias"},
      {"aliases can't have any content", "an alias with content of its own"},
      {"unexpected character in block scalar", "an unexpected character after '|' or '>'"},
      {"cannot set zero indentation for a block scalar", "a block value ('|0' or '>0') indented 0"},
      {"bad conversion", "a value of the wrong kind (a key must be a plain value)"},
  }};
  for (const auto& [theirs, ours] : kWords) {
    if (e.msg.starts_with(theirs)) return std::string(ours) + e.msg.substr(theirs.size());
  }
  return "not valid YAML here";
}

Result<YAML::Node> load_yaml_file(const std::string& path, std::string_view access_prefix) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return Status::invalid_argument(fmt::format("{}{}: not a regular file", access_prefix, path));
  const Result<std::string> text = read_file(path);
  if (!text.is_ok()) {
    if (access_prefix.empty()) return text.status();
    return Status::invalid_argument(fmt::format("{}{}", access_prefix, text.status().message()));
  }
  try {
    return YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(
        fmt::format("{}: malformed YAML: {}", where(path, e.mark), problem(e)));
  }
}

}  // namespace prism::yaml
