// The --out directory of a training run, checked and locked before any training starts: it is
// created if missing, must be a writable directory, and is locked (flock on DIR/.lock, released
// when the process ends, even by a crash) so a second run on the same directory stops at once
// with a clear error instead of interleaving checkpoints and metrics with the first.
#pragma once

#include <string>

namespace sample {

class RunDirectory {
 public:
  // Throws spmd::Error saying what is wrong with `path` and how to fix it.
  explicit RunDirectory(const std::string& path);
  ~RunDirectory();
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

 private:
  int lockFd_ = -1;
};

}  // namespace sample
