// In-process channels: the transport seam that lets a test drive a server
// (the coordinator, a capture, a fake) and its clients in one process with
// no socket file and no port. A Server listening on an in-process address
// (Address::Kind::kInProcess, a name) registers here; Connection::open to
// that name makes a connected socket pair, keeps one end and hands the
// other to the server, which takes it as it takes an accepted connection.
// Internal to wire/.
#pragma once

#include <functional>
#include <string>

#include "util/status.h"

namespace prism::wire::in_process {

// Takes the server's end of a new channel (a file descriptor it then owns).
// Called with the registry locked, from the connecting thread: it must only
// hand the descriptor over (asio::post), not run the server.
using Adopt = std::function<void(int fd)>;

// Registers a server under `name`; an error when the name is taken.
Status add(const std::string& name, Adopt adopt);
// Unregisters it; after this returns no Adopt of it runs.
void remove(const std::string& name);
// A new channel to the server `name`: the client's end, or unavailable when
// nothing is registered there.
Result<int> connect(const std::string& name);

}  // namespace prism::wire::in_process
