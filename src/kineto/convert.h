// The two ways a trace becomes a program (internal to src/kineto): from its
// GPU activity (device_program.cc) or, when it has none, from its host
// operators (host_program.cc). docs/kineto.md describes both.
#pragma once

#include "kineto/comm_args.h"
#include "kineto/kineto.h"
#include "kineto/trace_events.h"

namespace prism::kineto {

bool has_device_activity(const ParsedTrace& t);

// Each fills `out->program` and `out->summary` (world size aside).
Status device_program(const ParsedTrace& t, const CommContext& ctx,
                      const KinetoTraceOptions& options, KinetoTrace* out);
Status host_program(const ParsedTrace& t, const CommContext& ctx, const KinetoTraceOptions& options,
                    KinetoTrace* out);

}  // namespace prism::kineto
