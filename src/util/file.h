// Whole-file I/O. Writes are atomic: the content goes to a temporary file in
// the same directory which is then renamed over the target, so a reader never
// sees a half-written report and a failed run leaves the old file intact.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "util/status.h"

namespace prism {

Result<std::string> read_file(const std::string& path);
Status write_file_atomic(const std::string& path, std::string_view content);
// A set of outputs (a report and a trace, say) all or none: every content is
// written to its temporary file first, and only when all are written are
// they renamed into place; a failure leaves every target as it was.
Status write_files_atomic(std::span<const std::pair<std::string, std::string>> files);

}  // namespace prism
