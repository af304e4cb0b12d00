// The built drop-in is a libnccl.so.2: its SONAME, and its dynamic symbols
// are exactly the ncclX and pncclX functions NCCL 2.28's nccl.h declares,
// ncclDevCommCreate and ncclDevCommDestroy of its nccl_device/core.h (and
// their pnccl names), and PrismLLM's prismNcclMarker, nothing more (no
// client, fmt or C++ runtime symbols leak). The program that uses it needs
// it by that SONAME.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace prism::nccl_test {
namespace {

using ::testing::HasSubstr;

// stdout of `command`, or nullopt when it cannot run.
std::optional<std::string> run(const std::string& command) {
  FILE* f = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (f == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  return ::pclose(f) == 0 ? std::optional(out) : std::nullopt;
}

// The header without comments and string literals (std::regex recurses per
// character, too deep for long comments).
std::string code_of(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "/*") == 0) {
      const std::size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? text.size() : end + 1;
      out += ' ';
    } else if (text.compare(i, 2, "//") == 0) {
      i = std::min(text.find('\n', i), text.size()) - 1;
    } else if (text[i] == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
      out += "\"\"";
    } else {
      out += text[i];
    }
  }
  return out;
}

// Every function nccl.h declares: a name starting with nccl or pnccl
// followed by '(' outside comments and strings.
std::set<std::string> declared_functions() {
  std::ifstream in(PRISM_NCCL_HEADER);
  std::stringstream s;
  s << in.rdbuf();
  const std::string code = code_of(s.str());
  std::set<std::string> names;
  const std::regex decl(R"(\b(p?nccl[A-Za-z0-9_]*)\s*\()");
  for (auto it = std::sregex_iterator(code.begin(), code.end(), decl); it != std::sregex_iterator();
       ++it)
    names.insert((*it)[1]);
  return names;
}

TEST(NcclExportsTest, TheHeaderDeclaresBothNamesOfEveryFunction) {
  const std::set<std::string> names = declared_functions();
  ASSERT_GE(names.size(), 80u) << "could not read " << PRISM_NCCL_HEADER;
  for (const std::string& n : names) {
    if (n[0] == 'p') continue;
    EXPECT_TRUE(names.contains("p" + n)) << n;
  }
  EXPECT_TRUE(names.contains("ncclAlltoAll"));
  EXPECT_TRUE(names.contains("ncclCommWindowRegister"));
}

TEST(NcclExportsTest, ExportsExactlyTheDeclaredFunctions) {
  const std::optional<std::string> nm =
      run(std::string("nm -D --defined-only ") + PRISM_NCCL_LIBRARY);
  if (!nm) GTEST_SKIP() << "nm (binutils) is not available";
  std::set<std::string> exported;
  std::istringstream lines(*nm);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string address, type, name;
    if (words >> address >> type >> name) exported.insert(name.substr(0, name.find('@')));
  }
  std::set<std::string> declared = declared_functions();
  declared.insert("prismNcclMarker");     // PrismLLM's own: iteration markers from a frontend
  declared.insert("prismNcclFootprint");  // and NCCL's memory at full scale
  // The device API's host calls that torch 2.x links (nccl_device/core.h).
  for (const char* n : {"ncclDevCommCreate", "ncclDevCommDestroy"}) {
    declared.insert(n);
    declared.insert(std::string("p") + n);
  }
  for (const std::string& n : declared) EXPECT_TRUE(exported.contains(n)) << "missing " << n;
  for (const std::string& n : exported) EXPECT_TRUE(declared.contains(n)) << "extra " << n;
}

TEST(NcclExportsTest, IsLibnccl2AndNeedsNoCuda) {
  const std::optional<std::string> lib = run(std::string("readelf -d ") + PRISM_NCCL_LIBRARY);
  if (!lib) GTEST_SKIP() << "readelf (binutils) is not available";
  EXPECT_THAT(*lib, HasSubstr("Library soname: [libnccl.so.2]"));
  EXPECT_THAT(*lib, ::testing::Not(HasSubstr("libcuda")));
  EXPECT_THAT(*lib, ::testing::Not(HasSubstr("libprism_client")));
  const std::optional<std::string> program = run(std::string("readelf -d ") + PRISM_NCCL_PROGRAM);
  ASSERT_TRUE(program);
  EXPECT_THAT(*program, HasSubstr("Shared library: [libnccl.so.2]"));
}

}  // namespace
}  // namespace prism::nccl_test
