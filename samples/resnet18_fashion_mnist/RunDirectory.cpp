// RunDirectory: create, check writable, take the lock.
#include "RunDirectory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "runtime/base/AtomicFile.h"
#include "runtime/base/Error.h"

namespace sample {

RunDirectory::RunDirectory(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec))
    throw spmd::Error("--out " + path + " is a file, not a directory; pass a directory for the "
                      "metrics and checkpoints");
  fs::create_directories(path, ec);
  if (ec)
    throw spmd::Error("--out " + path + ": cannot create the directory: " + ec.message());
  std::string lock = (fs::path(path) / ".lock").string();
  lockFd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lockFd_ < 0)
    throw spmd::Error("--out " + path + " is not writable (" + std::strerror(errno) +
                      "); pass a directory you can write to");
  if (::flock(lockFd_, LOCK_EX | LOCK_NB) != 0) {
    int why = errno;
    ::close(lockFd_);
    lockFd_ = -1;
    if (why == EWOULDBLOCK)
      throw spmd::Error("--out " + path + " is in use by another training run (it holds " + lock +
                        "); wait for it to finish or pass another --out");
    throw spmd::Error("--out " + path + ": cannot lock " + lock + ": " + std::strerror(why));
  }
  // Writable for real (a read-only bind mount can still open an existing file read-write on
  // some file systems): a probe file, removed at once.
  std::string probe = (fs::path(path) / ".write-probe").string();
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, "ok", 2) != 2) {
    std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    ::close(lockFd_);
    throw spmd::Error("--out " + path + " is not writable (" + why + "); pass a directory you can write to");
  }
  ::close(fd);
  ::unlink(probe.c_str());
  // Temporaries of a run killed while it saved (atomic writes, runtime/base/AtomicFile.h): with
  // the lock held, no other writer of these files can be running.
  for (const char* file : {"checkpoint.safetensors", "metrics.csv"}) {
    int removed = spmd::removeStaleTemporaries((fs::path(path) / file).string());
    if (removed) std::printf("removed %d temporary file%s of an interrupted save of %s\n", removed,
                             removed == 1 ? "" : "s", file);
  }
}

RunDirectory::~RunDirectory() {
  if (lockFd_ >= 0) ::close(lockFd_);
}

}  // namespace sample
