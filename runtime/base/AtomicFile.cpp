// writeFileAtomically with POSIX calls.
#include "runtime/base/AtomicFile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "runtime/base/Error.h"

namespace spmd {
namespace {

void writeAll(int fd, const std::byte* p, size_t bytes, const std::string& path) {
  while (bytes > 0) {
    ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(path + ": write failed: " + std::strerror(errno));
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

// The temporaries beside `target` are named this prefix and 6 characters (mkostemp's XXXXXX).
std::string temporaryPrefix(const std::filesystem::path& target) {
  std::string prefix = ".";  // built by appends: GCC 12 warns (-Wrestrict) on "." + name once inlined
  prefix += target.filename().string();
  prefix += '.';
  return prefix;
}

}  // namespace

void writeFileAtomically(const std::string& path, const std::vector<std::span<const std::byte>>& parts) {
  std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  // A unique temporary name, so two writers of one path never share (and tear) a temp file.
  std::error_code ignored;
  if (std::filesystem::is_directory(target, ignored))
    throw Error(path + ": is a directory; name a file (in it, or beside it) to write");
  std::string temp = (dir / (temporaryPrefix(target) + "XXXXXX")).string();
  int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) {
    std::string message = path;
    message += ": cannot write: its temporary file " + temp + " cannot be created (";
    message += std::strerror(errno);
    message += "); ";
    if (std::filesystem::is_directory(dir, ignored))
      message += "make the directory " + dir.string() + " writable";
    else
      message += "the directory " + dir.string() + " does not exist: create it";
    throw Error(message);
  }
  ::fchmod(fd, 0644);
  try {
    for (std::span<const std::byte> part : parts) writeAll(fd, part.data(), part.size(), temp);
    if (::fsync(fd) != 0) throw Error(temp + ": fsync failed: " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(temp.c_str());
    throw Error(path + ": cannot replace with the new file: " + why);
  }
  int dirfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd >= 0) {
    ::fsync(dirfd);
    ::close(dirfd);
  }
}

int removeStaleTemporaries(const std::string& path) {
  std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  const std::string prefix = temporaryPrefix(target);
  int removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    std::string name = entry.path().filename().string();
    if (name.size() == prefix.size() + 6 && name.rfind(prefix, 0) == 0 && entry.is_regular_file(error))
      removed += std::filesystem::remove(entry.path(), error) ? 1 : 0;
  }
  return removed;
}

}  // namespace spmd
