// The check before reading a file a user named (a program, a checkpoint): where the path is a
// directory or no regular file (a device, a pipe or a socket, whose size cannot be known), a
// clear error naming it, instead of what reading it gives (a directory's "size" of 2^64 - 1
// bytes ended as std::bad_alloc).
#pragma once

#include <string>

namespace spmd {

// Throws spmd::Error where `path` is there but is not a regular file: "<path>: is a directory,
// not a <what> file" and `hint` (how to name the file), or that it is no regular file. A path
// that is not there passes: opening it then says so, with the system's reason.
void requireRegularFile(const std::string& path, const std::string& what, const std::string& hint = "");

}  // namespace spmd
