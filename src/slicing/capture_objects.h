// Internal to slicing (slicing/capture_file.cc): a capture file's
// "objects", the objects its rank sent with send_object_list and
// broadcast_object_list (slicing/object_keys.h), each its key and its value
// in base64 (RFC 4648, with padding).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "slicing/capture_file.h"
#include "util/status.h"

namespace prism::capture_objects {

std::string base64(std::span<const std::uint8_t> bytes);
// nullopt when `text` is not base64 as base64() writes it.
std::optional<std::vector<std::uint8_t>> from_base64(std::string_view text);

// One object's line: {"key":"prism/object/0/to/32/0","base64":"..."}.
nlohmann::json to_json(const CapturedObject& o);
// The document's "objects" list, when it has one; errors name `source` and
// the object's index.
Result<std::vector<CapturedObject>> read(const nlohmann::json& doc, const std::string& source);

}  // namespace prism::capture_objects
