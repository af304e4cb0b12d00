#include "slicing/capture_objects.h"

#include <array>

#include <fmt/format.h>

#include "slicing/object_keys.h"

namespace prism::capture_objects {

namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int value_of(char c) {
  const std::size_t at = kAlphabet.find(c);
  return at == std::string_view::npos ? -1 : static_cast<int>(at);
}

}  // namespace

std::string base64(std::span<const std::uint8_t> bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 3; ++k) v = v << 8 | (k < n ? bytes[i + k] : 0u);
    for (std::size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

std::optional<std::vector<std::uint8_t>> from_base64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::vector<std::uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    std::size_t pad = 0;
    if (last) pad = text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0;
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const int d = k < 4 - pad ? value_of(text[i + k]) : 0;
      if (d < 0) return std::nullopt;
      v = v << 6 | static_cast<std::uint32_t>(d);
    }
    for (std::size_t k = 0; k < 3 - pad; ++k)
      out.push_back(static_cast<std::uint8_t>(v >> (16 - 8 * k)));
    if (base64(std::span(out).last(3 - pad)).substr(0, 4 - pad) != text.substr(i, 4 - pad))
      return std::nullopt;  // bits past the last byte set: not as base64() writes it
  }
  return out;
}

nlohmann::json to_json(const CapturedObject& o) {
  return {{"key", o.key}, {"base64", base64(o.bytes)}};
}

Result<std::vector<CapturedObject>> read(const nlohmann::json& doc, const std::string& source) {
  std::vector<CapturedObject> out;
  const auto it = doc.find("objects");
  if (it == doc.end()) return out;
  if (!it->is_array())
    return Status::invalid_argument(fmt::format("{}: \"objects\" is not a list", source));
  for (std::size_t i = 0; i < it->size(); ++i) {
    const nlohmann::json& o = (*it)[i];
    const auto fail = [&](const std::string& why) {
      return Status::invalid_argument(fmt::format("{}: object {}: {}", source, i, why));
    };
    if (!o.is_object() || !o.contains("key") || !o["key"].is_string())
      return fail("no \"key\" string");
    const std::string key = o["key"].get<std::string>();
    if (!parse_object_key(key))
      return fail(
          fmt::format("\"{}\" is not an object key (prism/object/<src>/to/<dst>/<n>, or "
                      "prism/object/<src>/group|all_gather|gather/<ranks>/<n>)",
                      key));
    if (!o.contains("base64") || !o["base64"].is_string()) return fail("no \"base64\" string");
    auto bytes = from_base64(o["base64"].get<std::string>());
    if (!bytes) return fail("\"base64\" is not base64");
    out.push_back({key, std::move(*bytes)});
  }
  return out;
}

}  // namespace prism::capture_objects
