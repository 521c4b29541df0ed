// Writing a file so that readers see the old contents or the new, never a torn file: a temporary
// file beside it, fsync, rename over the target, fsync of the directory.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace spmd {

// Writes the concatenation of `parts` to `path`. Throws spmd::Error naming the file and the
// failing call; the previous file is then unchanged.
void writeFileAtomically(const std::string& path, const std::vector<std::span<const std::byte>>& parts);

// Removes the temporaries writeFileAtomically leaves beside `path` when its process is killed
// mid-write ("." + file name + "." + 6 characters); returns how many. Only call it where no
// other writer of `path` can be running (e.g. holding the directory's lock).
int removeStaleTemporaries(const std::string& path);

}  // namespace spmd
