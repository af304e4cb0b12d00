// A captured rank's program: a capture (slicing/capture_file.h), message by
// message, becomes the RankProgram that slicing builds a job's graph from
// (slicing/slices.h).
//
// The capture's times become the program: the host's time between two of
// its messages is a compute op on a "host" stream; each communication op
// runs on a stream of its own (the client's stream id) after the host has
// reached it. A host that waited for an op (a wait naming it) depends on it
// there. An op whose completion the rank only learned from a deadline-bound
// wait (a progress thread polling), not from a wait naming it, is depended
// on at the rank's next iteration marker or its goodbye: the program's
// real wait for it (a future, a stream) is not visible on the wire. A
// receive is the exception: its data is what the host goes on with (a
// blocking recv, or irecv's wait before the tensor is used), so the host's
// next op depends on it however its completion was learned.
//
// Communicators keep their members (global ranks, in communicator order),
// and a send's or receive's peer becomes a global rank, as a RankProgram
// (slicing/rank_program.h) holds them.
#pragma once

#include <string>
#include <string_view>

#include "slicing/capture_file.h"
#include "slicing/rank_program.h"
#include "util/status.h"

namespace prism {

// The program of `capture`, a rank in a world of `world_size` ranks;
// `source` names it in errors ("cap.json: event 3: ...") and in the program.
Result<RankProgram> program_from_capture(const RankCapture& capture, const std::string& source,
                                         int world_size);
// The same, of a capture file's text (parse_capture_json()).
Result<RankProgram> program_from_capture(std::string_view capture_json, const std::string& source,
                                         int world_size);

}  // namespace prism
