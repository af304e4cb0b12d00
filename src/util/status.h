// Status and Result<T>: how bad input and I/O failures travel in PrismLLM.
//
// A Status is cheap when ok (no allocation) and otherwise carries a code and a
// message that names the place (file:line, JSON path, rank, op). Broken
// invariants are not Statuses: they are PRISM_CHECK failures (util/check.h).
// Simulated outcomes (deadlock, OOM) are neither: they are results of a run.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "util/check.h"

namespace prism {

enum class StatusCode : unsigned char {
  kOk = 0,
  kInvalidArgument,     // bad input: malformed file, impossible configuration
  kNotFound,            // a named file or entity does not exist
  kIoError,             // the OS refused a read or write
  kUnavailable,         // a peer is gone: a connection closed, a process ended
  kDeadlineExceeded,    // something did not happen in time: a connect, an answer
  kFailedPrecondition,  // a well-formed request in the wrong state: out of order, refused now
  kAborted,             // the run was ended by another party: a coordinator's abort, a stop
  kUnimplemented,       // a valid request PrismLLM does not support
  kInternal,            // a third-party library failed in a way that is not the input's fault
};

// The code's name in lower snake case ("invalid_argument"), for logs and tests.
std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status invalid_argument(std::string msg) {
    return Status(StatusCode::kInvalidArgument, std::move(msg));
  }
  static Status not_found(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
  static Status io_error(std::string msg) { return Status(StatusCode::kIoError, std::move(msg)); }
  static Status unavailable(std::string msg) {
    return Status(StatusCode::kUnavailable, std::move(msg));
  }
  static Status deadline_exceeded(std::string msg) {
    return Status(StatusCode::kDeadlineExceeded, std::move(msg));
  }
  static Status failed_precondition(std::string msg) {
    return Status(StatusCode::kFailedPrecondition, std::move(msg));
  }
  static Status aborted(std::string msg) { return Status(StatusCode::kAborted, std::move(msg)); }
  static Status unimplemented(std::string msg) {
    return Status(StatusCode::kUnimplemented, std::move(msg));
  }
  static Status internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }

  bool is_ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const;
  // The same status with `context` prepended ("context: message").
  Status with_context(std::string_view context) const;
  // The same status with `detail` appended to its message, as written.
  Status with_detail(std::string_view detail) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  Status(StatusCode code, std::string msg)
      : rep_(std::make_shared<const Rep>(Rep{code, std::move(msg)})) {}
  std::shared_ptr<const Rep> rep_;
};

// Either a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    PRISM_CHECK(!std::get<Status>(v_).is_ok(), "Result built from an ok Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & {
    PRISM_CHECK(is_ok(), "value() of a failed Result: " + status().message());
    return std::get<T>(v_);
  }
  const T& value() const& {
    PRISM_CHECK(is_ok(), "value() of a failed Result: " + status().message());
    return std::get<T>(v_);
  }
  T&& value() && {
    PRISM_CHECK(is_ok(), "value() of a failed Result: " + status().message());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace prism

// Returns early from the enclosing function if `expr` (a Status) is not ok.
#define PRISM_RETURN_IF_ERROR(expr)                   \
  do {                                                \
    ::prism::Status prism_status_ = (expr);           \
    if (!prism_status_.is_ok()) return prism_status_; \
  } while (0)

#define PRISM_CONCAT_INNER_(a, b) a##b
#define PRISM_CONCAT_(a, b) PRISM_CONCAT_INNER_(a, b)
// PRISM_ASSIGN_OR_RETURN(auto x, expr): unwraps a Result or returns its Status.
#define PRISM_ASSIGN_OR_RETURN(lhs, expr) \
  PRISM_ASSIGN_OR_RETURN_IMPL_(PRISM_CONCAT_(prism_result_, __LINE__), lhs, expr)
// `lhs` is a declaration or an lvalue, so it cannot be parenthesized.
#define PRISM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) /* NOLINT(bugprone-macro-parentheses) */ \
  auto tmp = (expr);                                                                          \
  if (!tmp.is_ok()) return tmp.status();                                                      \
  lhs = std::move(tmp).value()
