// requireRegularFile: std::filesystem's view of the path, before any byte is read.
#include "runtime/base/InputFile.h"

#include <filesystem>

#include "runtime/base/Error.h"

namespace spmd {

void requireRegularFile(const std::string& path, const std::string& what, const std::string& hint) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(status) || std::filesystem::is_regular_file(status)) return;
  if (std::filesystem::is_directory(status))
    throw Error(path + ": is a directory, not a " + what + " file" + (hint.empty() ? "" : "; " + hint));
  throw Error(path + ": is not a regular file (a device, a pipe or a socket), so no " + what +
              " can be read from it; give the " + what + " file itself");
}

}  // namespace spmd
