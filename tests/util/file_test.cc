#include "util/file.h"

#include <filesystem>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

namespace prism {
namespace {

std::filesystem::path temp_dir() {
  auto dir =
      std::filesystem::temp_directory_path() / ("prism_file_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(FileTest, AtomicWriteThenRead) {
  const auto path = (temp_dir() / "out.json").string();
  ASSERT_TRUE(write_file_atomic(path, "first").is_ok());
  ASSERT_TRUE(write_file_atomic(path, "second").is_ok());
  auto back = read_file(path);
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, "second");
  // No temporary files left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(temp_dir()))
    files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  std::filesystem::remove_all(temp_dir());
}

TEST(FileTest, MissingFileIsNotFound) {
  auto r = read_file("/nonexistent/prism/graph.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/prism/graph.json"), std::string::npos);
}

TEST(FileTest, WriteIntoMissingDirectoryFailsAndNamesThePath) {
  Status s = write_file_atomic("/nonexistent/prism/report.json", "x");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("/nonexistent/prism/report.json"), std::string::npos);
}

}  // namespace
}  // namespace prism
