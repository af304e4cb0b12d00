#include "report/op_label.h"

namespace prism {

std::string_view op_label(const Role& role, const Op& op) {
  if (op.name != kNone) return role.names[op.name];
  if (op.kind == OpKind::kCollective) return to_string(op.collective);
  return to_string(op.kind);
}

}  // namespace prism
