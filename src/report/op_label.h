// Small helpers shared by the report writers: how an op and a time are shown
// to people and to JSON readers.
#pragma once

#include <string_view>

#include "graph/graph.h"
#include "util/units.h"

namespace prism {

// The op's name when it has one, else its collective kind ("all_reduce") or
// its op kind ("send", "alloc").
std::string_view op_label(const Role& role, const Op& op);

// Exact conversions from integer nanoseconds: dividing (rather than
// multiplying by 1e-9) gives the double nearest the decimal value, so JSON
// shows 0.001234 and not 0.0012340000000000001.
inline double to_seconds(SimTime t) {
  return static_cast<double>(t.ns) / 1e9;
}
inline double to_micros(SimTime t) {
  return static_cast<double>(t.ns) / 1e3;
}

}  // namespace prism
