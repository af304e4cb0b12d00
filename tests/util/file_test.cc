#include "util/file.h"

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

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

// A set of outputs is all or none: when one cannot be written, the others'
// targets keep what they held and no temporary file stays.
TEST(FileTest, AnOutputSetIsWrittenAllOrNone) {
  const auto dir = temp_dir() / "set";
  std::filesystem::create_directories(dir);
  const std::string report = (dir / "report.json").string();
  const std::string trace = (dir / "trace.json").string();
  ASSERT_TRUE(write_file_atomic(report, "old").is_ok());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {report, "new report"}, {"/nonexistent/prism/trace.json", "trace"}};
  const Status s = write_files_atomic(bad);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("/nonexistent/prism/trace.json"), std::string::npos);
  EXPECT_EQ(*read_file(report), "old");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  const std::vector<std::pair<std::string, std::string>> good = {{report, "new report"},
                                                                 {trace, "trace"}};
  ASSERT_TRUE(write_files_atomic(good).is_ok());
  EXPECT_EQ(*read_file(report), "new report");
  EXPECT_EQ(*read_file(trace), "trace");
  std::filesystem::remove_all(temp_dir());
}

}  // namespace
}  // namespace prism
