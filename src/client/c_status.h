// The one place a client Status becomes the C ABI's prism_status
// (include/prism/client.h): by its code, once the connection is open;
// before, every failure is the connect's.
#pragma once

#include "prism/client.h"
#include "util/status.h"

namespace prism::client {

// `opened`: the connection to the coordinator had opened (always, but for a
// failed Client::connect).
prism_status c_status_of(const Status& s, bool opened = true);

}  // namespace prism::client
