// ncclUniqueId for the drop-in: nothing to bootstrap (the coordinator
// matches communicators by size, position and order), so an id only has to
// be unique, and its FNV-1a hash names the communicator to the coordinator.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shim/nccl/entry.h"
#include "util/hash.h"

namespace prism::nccl {

// Fills *id from the pid, $RANK, a per-process counter, the clocks and
// /dev/urandom.
void make_unique_id(ncclUniqueId* id) noexcept;

}  // namespace prism::nccl
