// Whole-file I/O. Writes are atomic: the content goes to a temporary file in
// the same directory which is then renamed over the target, so a reader never
// sees a half-written report and a failed run leaves the old file intact.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace prism {

Result<std::string> read_file(const std::string& path);
Status write_file_atomic(const std::string& path, std::string_view content);

}  // namespace prism
