#include "client/c_status.h"

namespace prism::client {

prism_status c_status_of(const Status& s, bool opened) {
  if (s.is_ok()) return PRISM_OK;
  if (!opened) return PRISM_ERR_CONNECT;  // no coordinator at the address, or none in time
  switch (s.code()) {
    case StatusCode::kOk:
      return PRISM_OK;
    case StatusCode::kInvalidArgument:
      return PRISM_ERR_ARGUMENT;
    case StatusCode::kFailedPrecondition:
      return PRISM_ERR_REJECTED;
    case StatusCode::kAborted:
      return PRISM_ERR_ABORTED;
    case StatusCode::kUnavailable:       // the coordinator hung up
    case StatusCode::kDeadlineExceeded:  // nothing came in time
    case StatusCode::kInternal:          // a breach of the protocol
    case StatusCode::kNotFound:
    case StatusCode::kIoError:
    case StatusCode::kUnimplemented:
      break;
  }
  return PRISM_ERR_PROTOCOL;
}

}  // namespace prism::client
