#include "util/progress.h"

#include <unistd.h>

#include <cstdio>

namespace prism {

void progress(std::string_view line) {
  if (::isatty(STDERR_FILENO))
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
}

}  // namespace prism
