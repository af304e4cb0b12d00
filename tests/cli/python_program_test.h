// A test that runs `prism emulate` on PyTorch programs through PrismLLM's
// c10d backend: skipped where the interpreter cannot import torch or the
// build has no backend; a private temporary directory per test.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace prism::testing {

inline const std::string kPython = PRISM_PYTHON;
inline const std::string kBackend = PRISM_BINARY_DIR "/python/prism_torch";

class PythonProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    if (std::system((kPython + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0)
      GTEST_SKIP() << kPython << " cannot import torch (scripts/setup.sh installs torch in .venv)";
    if (!fs::exists(kBackend))
      GTEST_SKIP() << "this build has no PrismLLM c10d backend (" << kBackend << ")";
    std::string templ = (fs::temp_directory_path() / "prism_program_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    tmp_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    if (!tmp_.empty()) std::filesystem::remove_all(tmp_, ec);
  }
  std::string tmp_;
};

}  // namespace prism::testing
