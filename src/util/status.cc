#include "util/status.h"

namespace prism {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kNotFound:
      return "not_found";
    case StatusCode::kIoError:
      return "io_error";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case StatusCode::kFailedPrecondition:
      return "failed_precondition";
    case StatusCode::kAborted:
      return "aborted";
    case StatusCode::kUnimplemented:
      return "unimplemented";
    case StatusCode::kInternal:
      return "internal";
  }
  return "unknown";
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

Status Status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  return Status(rep_->code, std::string(context) + ": " + rep_->message);
}

Status Status::with_detail(std::string_view detail) const {
  if (is_ok()) return *this;
  return Status(rep_->code, rep_->message + std::string(detail));
}

}  // namespace prism
