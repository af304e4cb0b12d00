#include "shim/nccl/unique_id.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace prism::nccl {
namespace {

std::int64_t clock_ns(clockid_t which) {
  timespec t{};
  clock_gettime(which, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// Fills `n` bytes from /dev/urandom; false when it cannot.
bool urandom(unsigned char* out, std::size_t n) {
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, out + got, n - got);
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  ::close(fd);
  return got == n;
}

}  // namespace

void make_unique_id(ncclUniqueId* id) noexcept {
  static std::atomic<std::uint64_t> counter{0};
  struct {
    char magic[8] = {'P', 'R', 'S', 'M', 'N', 'C', 'C', 'L'};
    std::int64_t pid = 0;
    std::int64_t rank = -1;
    std::uint64_t counter = 0;
    std::int64_t realtime_ns = 0;
    std::int64_t monotonic_ns = 0;
  } head;
  static_assert(sizeof(head) <= sizeof(id->internal) / 2);
  head.pid = ::getpid();
  if (const char* r = std::getenv("RANK")) head.rank = std::atoll(r);
  head.counter = counter.fetch_add(1);
  head.realtime_ns = clock_ns(CLOCK_REALTIME);
  head.monotonic_ns = clock_ns(CLOCK_MONOTONIC);
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, &head, sizeof(head));
  auto* rest = reinterpret_cast<unsigned char*>(id->internal) + sizeof(head);
  const std::size_t n = sizeof(id->internal) - sizeof(head);
  if (!urandom(rest, n)) {
    // No /dev/urandom (a sandbox): the head is unique already; spread it.
    std::uint64_t h = fnv1a(&head, sizeof(head));
    for (std::size_t i = 0; i < n; ++i) {
      h = fnv1a(&i, sizeof(i), h);
      rest[i] = static_cast<unsigned char>(h >> 56);
    }
  }
}

}  // namespace prism::nccl
