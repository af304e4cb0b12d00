#include "util/file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace prism {

Result<std::string> read_file(const std::string& path) {
  // A directory opens as an empty stream on Linux; name the problem instead.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Status::invalid_argument(path + ": is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return Status::not_found(path + ": no such file");
    return Status::io_error(path + ": " + std::strerror(errno));
  }
  // A regular file in one read (traces and graphs run to hundreds of MB);
  // a pipe or device, whose size is unknown, as a stream.
  if (std::filesystem::is_regular_file(path, ec)) {
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec) return Status::io_error(path + ": " + ec.message());
    std::string bytes(static_cast<std::size_t>(size), '\0');
    if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
      return Status::io_error(path + ": read failed");
    return bytes;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::io_error(path + ": read failed");
  return ss.str();
}

namespace {

// Writes `content` to a new temporary file beside `path`; its name.
Result<std::string> stage(const std::string& path, std::string_view content) {
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0)
    return Status::io_error(path + ": cannot create temporary file: " + std::strerror(errno));
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::io_error(path + ": write failed: " + err);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status::io_error(path + ": cannot flush: " + err);
  }
  // mkstemp creates 0600; reports are ordinary files.
  ::chmod(tmp.c_str(), 0644);
  return tmp;
}

Status commit(const std::string& tmp, const std::string& path) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status::io_error(path + ": cannot rename into place: " + err);
  }
  return Status::ok();
}

}  // namespace

Status write_file_atomic(const std::string& path, std::string_view content) {
  PRISM_ASSIGN_OR_RETURN(const std::string tmp, stage(path, content));
  return commit(tmp, path);
}

Status write_files_atomic(std::span<const std::pair<std::string, std::string>> files) {
  std::vector<std::string> staged;
  for (const auto& [path, content] : files) {
    Result<std::string> tmp = stage(path, content);
    if (!tmp.is_ok()) {
      for (const std::string& t : staged) ::unlink(t.c_str());
      return tmp.status();
    }
    staged.push_back(std::move(tmp).value());
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (Status s = commit(staged[i], files[i].first); !s.is_ok()) {
      for (std::size_t j = i + 1; j < staged.size(); ++j) ::unlink(staged[j].c_str());
      return s;
    }
  }
  return Status::ok();
}

}  // namespace prism
