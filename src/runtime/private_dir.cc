#include "runtime/private_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "util/file.h"

namespace prism::runtime {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "prism-";
constexpr std::string_view kOwnerFile = "owner";

// Whether `name` is what mkdtemp makes of prism-XXXXXX.
bool private_dir_name(const std::string& name) {
  if (name.size() != kPrefix.size() + 6 || name.rfind(kPrefix, 0) != 0) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(kPrefix.size()), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; });
}

// The directory is stale: ours, with an owner file whose process is gone.
bool stale(const fs::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid())
    return false;
  std::ifstream in(dir / kOwnerFile);
  std::string owner;
  if (!in || !std::getline(in, owner)) return false;  // being made, or not ours to judge
  std::istringstream words(owner);
  int pid = 0;
  if (!(words >> pid) || pid <= 0) return false;
  return process_identity(pid) != owner;
}

}  // namespace

std::string process_identity(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!in || !std::getline(in, stat)) return "";
  // Field 2 (the command) is in parentheses and may hold spaces: count the
  // fields after its closing one. Field 22 is the start time.
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i)
    if (!(rest >> field)) return "";
  return fmt::format("{} {}", pid, field);
}

std::vector<std::string> sweep_stale_private_dirs(const std::string& temp_dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(temp_dir, ec)) {
    if (!private_dir_name(e.path().filename().string()) || !stale(e.path())) continue;
    std::error_code rm;
    fs::remove_all(e.path(), rm);
    if (!rm) removed.push_back(e.path().string());
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

Result<std::string> make_private_dir(const std::string& temp_dir) {
  sweep_stale_private_dirs(temp_dir);
  const std::string pattern = (fs::path(temp_dir) / "prism-XXXXXX").string();
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    return Status::io_error(fmt::format("cannot make a directory like {}", pattern));
  const std::string dir(buf.data());
  const std::string owner = process_identity(static_cast<int>(::getpid()));
  if (Status s = write_file_atomic(dir + "/" + std::string(kOwnerFile), owner + "\n"); !s.is_ok()) {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
    return s;
  }
  return dir;
}

}  // namespace prism::runtime
