// The private directory of an emulation: made 0700 with its owner, and the
// ones of killed runs swept by the next (runtime/private_dir.h).
#include "runtime/private_dir.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace prism::runtime {
namespace {

namespace fs = std::filesystem;

class PrivateDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/prism_private_dir_test_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    tmp_ = pattern;
  }
  void TearDown() override { fs::remove_all(tmp_); }

  // A directory like a run's, with `owner` in its owner file (none if empty).
  std::string fake(const std::string& name, const std::string& owner) {
    const fs::path dir = fs::path(tmp_) / name;
    fs::create_directory(dir);
    std::ofstream(dir / "graph.json") << "{}";
    if (!owner.empty()) std::ofstream(dir / "owner") << owner << "\n";
    return dir.string();
  }

  std::string tmp_;
};

// The pid of a process that has exited and been reaped.
int dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return static_cast<int>(child);
}

TEST_F(PrivateDirTest, MadeForThisUserOnlyAndNamesItsOwner) {
  const Result<std::string> dir = make_private_dir(tmp_);
  ASSERT_TRUE(dir.is_ok()) << dir.status().message();
  EXPECT_EQ(fs::path(*dir).parent_path(), fs::path(tmp_));
  EXPECT_EQ(fs::path(*dir).filename().string().rfind("prism-", 0), 0u);
  struct stat st {};
  ASSERT_EQ(::stat(dir->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  std::ifstream in(fs::path(*dir) / "owner");
  std::string owner;
  std::getline(in, owner);
  EXPECT_EQ(owner, process_identity(static_cast<int>(::getpid())));
  EXPECT_FALSE(owner.empty());
  // Its own directory is never swept: its owner lives.
  EXPECT_TRUE(sweep_stale_private_dirs(tmp_).empty());
  EXPECT_TRUE(fs::exists(*dir));
}

TEST_F(PrivateDirTest, ADeadOwnersDirectoryIsSweptByTheNextRun) {
  const std::string gone = fake("prism-aB3dE9", std::to_string(dead_pid()) + " 12345");
  const Result<std::string> dir = make_private_dir(tmp_);
  ASSERT_TRUE(dir.is_ok());
  EXPECT_FALSE(fs::exists(gone));
  EXPECT_TRUE(fs::exists(*dir));
}

// A live pid with another start time is a reused pid: its run is gone.
TEST_F(PrivateDirTest, AReusedPidIsNotTheOwner) {
  const std::string me = process_identity(static_cast<int>(::getpid()));
  const std::string reused = fake("prism-Reused", std::to_string(::getpid()) + " 1");
  const std::string live = fake("prism-LiveOk", me);
  EXPECT_EQ(sweep_stale_private_dirs(tmp_), std::vector<std::string>{reused});
  EXPECT_TRUE(fs::exists(live));
}

// Left alone: no owner file (a run making it, or an older PrismLLM), a name
// mkdtemp would not make, an unreadable owner line.
TEST_F(PrivateDirTest, WhatItCannotJudgeIsLeftAlone) {
  const std::string dead = std::to_string(dead_pid()) + " 7";
  const std::string no_owner = fake("prism-NoOwnr", "");
  const std::string other_name = fake("prism-toolongname", dead);
  const std::string garbage = fake("prism-Garbge", "not a pid");
  EXPECT_TRUE(sweep_stale_private_dirs(tmp_).empty());
  EXPECT_TRUE(fs::exists(no_owner));
  EXPECT_TRUE(fs::exists(other_name));
  EXPECT_TRUE(fs::exists(garbage));
}

TEST_F(PrivateDirTest, ProcessIdentityOfAGoneProcessIsEmpty) {
  EXPECT_EQ(process_identity(dead_pid()), "");
  const std::string me = process_identity(static_cast<int>(::getpid()));
  EXPECT_EQ(me.rfind(std::to_string(::getpid()) + " ", 0), 0u);
}

}  // namespace
}  // namespace prism::runtime
