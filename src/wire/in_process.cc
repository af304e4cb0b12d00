#include "wire/in_process.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include <fmt/format.h>

namespace prism::wire::in_process {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, Adopt> servers;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: servers may outlive main's statics
  return *r;
}

}  // namespace

Status add(const std::string& name, Adopt adopt) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (!r.servers.emplace(name, std::move(adopt)).second)
    return Status::io_error(fmt::format("inproc:{}: cannot listen: the name is taken", name));
  return Status::ok();
}

void remove(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.servers.erase(name);
}

Result<int> connect(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  const auto it = r.servers.find(name);
  if (it == r.servers.end())
    return Status::unavailable(fmt::format("inproc:{}: cannot connect: no server there", name));
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return Status::io_error(fmt::format("inproc:{}: socketpair: {}", name, std::strerror(errno)));
  it->second(fds[1]);
  return fds[0];
}

}  // namespace prism::wire::in_process
