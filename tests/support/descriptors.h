// For tests of a server out of file descriptors: the process's descriptor
// table filled under a lowered limit, and the process's CPU time, by which a
// test sees whether a loop spins meanwhile. Header-only.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <vector>

namespace prism::testing {

// Process CPU time (user + system) so far.
inline std::chrono::microseconds cpu_time() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto us = [](const timeval& t) { return std::int64_t{t.tv_sec} * 1'000'000 + t.tv_usec; };
  return std::chrono::microseconds(us(u.ru_utime) + us(u.ru_stime));
}

// Lowers RLIMIT_NOFILE to at most `limit` and fills the table with copies of
// descriptor 0 until no more fit; release() closes them and restores the
// limit (the destructor too, when a test ends early).
class FullDescriptorTable {
 public:
  explicit FullDescriptorTable(rlim_t limit = 256) {
    if (::getrlimit(RLIMIT_NOFILE, &saved_) != 0) return;
    rlimit low = saved_;
    low.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, limit);
    if (::setrlimit(RLIMIT_NOFILE, &low) != 0) return;
    lowered_ = true;
    for (int fd; (fd = ::dup(0)) >= 0;) filler_.push_back(fd);
    full_errno_ = errno;
  }
  ~FullDescriptorTable() { release(); }
  FullDescriptorTable(const FullDescriptorTable&) = delete;
  FullDescriptorTable& operator=(const FullDescriptorTable&) = delete;

  bool lowered() const { return lowered_; }       // the limit was lowered
  int full_errno() const { return full_errno_; }  // why the last dup failed (EMFILE)
  // Frees the table and restores the limit; false when the limit could not be restored.
  bool release() {
    for (int fd : filler_) ::close(fd);
    filler_.clear();
    if (!lowered_) return true;
    lowered_ = false;
    return ::setrlimit(RLIMIT_NOFILE, &saved_) == 0;
  }

 private:
  rlimit saved_{};
  bool lowered_ = false;
  int full_errno_ = 0;
  std::vector<int> filler_;
};

}  // namespace prism::testing
