#include "util/status.h"

namespace prism {

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

Status Status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  return Status(rep_->code, std::string(context) + ": " + rep_->message);
}

}  // namespace prism
