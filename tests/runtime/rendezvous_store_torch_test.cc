// torch's own TCPStore client (the system's python3, torch 1.13 on Debian 12)
// against the rendezvous store: tcpstore_torch_test.py does the talking.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "runtime/rendezvous_store.h"

namespace prism::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kPython = PRISM_PYTHON;

// Runs `cmd` through the shell; its exit code and everything it printed.
std::pair<int, std::string> run(const std::string& cmd) {
  std::string output;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::array<char, 4096> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) output.append(buf.data(), n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST(RendezvousStoreTorch, TorchsClientWorksAgainstTheStore) {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " is not installed";
  auto [rc, why] =
      run(fmt::format("{} -c 'import torch.distributed as d; "
                      "assert d.is_available()'",
                      kPython));
  if (rc != 0) GTEST_SKIP() << kPython << " cannot import torch.distributed: " << why;

  StoreOptions o;
  o.world_size = 8;
  o.real_ranks = {1, 5};
  auto store = RendezvousStore::start("127.0.0.1", 0, o);
  ASSERT_TRUE(store.is_ok()) << store.status().message();
  const std::string script =
      std::string(PRISM_SOURCE_DIR) + "/tests/runtime/tcpstore_torch_test.py";
  auto [status, output] =
      run(fmt::format("timeout 120 {} {} 127.0.0.1 {}", kPython, script, (*store)->port()));
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("PASS"));
  // The only error is the Gloo group the script tried to create.
  EXPECT_THAT((*store)->errors(),
              ElementsAre(HasSubstr("rank 1 created a Gloo process group that PrismLLM cannot "
                                    "interpose (group '0'")));
}

}  // namespace
}  // namespace prism::runtime
