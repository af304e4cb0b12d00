// Progress lines on stderr ("reading job.yaml...", "replaying 16 ranks..."),
// printed only when a person watches stderr, so that captured output (golden
// tests, pipelines) stays the same from run to run.
#pragma once

#include <string_view>

namespace prism {

void progress(std::string_view line);

}  // namespace prism
