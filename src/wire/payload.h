// The payload of each message type: its fields in order, little-endian, and
// their range checks (docs/protocol.md). Internal to wire/: protocol.cc adds
// the frame header around it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "wire/protocol.h"

namespace prism::wire {

std::string encode_payload(const Message& m);

// The message of type `t` in `payload`; on failure `why` names the field
// ("bytes -5 is negative", "payload ends inside at") and the result is not
// to be used.
std::optional<Message> decode_payload(MessageType t, std::string_view payload, std::string* why);

}  // namespace prism::wire
