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

}  // namespace spmd
