// Checkpoints in the safetensors format (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
// then the raw little-endian data. Readable by the `safetensors` Python package and by the
// hand-parsing loader in samples/resnet18_fashion_mnist/eval_torch.py.
#pragma once

#include <map>
#include <string>

#include "runtime/base/Array.h"

namespace spmd::io {

struct Checkpoint {
  std::map<std::string, Array> tensors;            // by name, e.g. "params.fc.weight"
  std::map<std::string, std::string> metadata;     // the header's "__metadata__" (strings only)
};

// Writes atomically: a temporary file beside `path`, flushed and fsync'ed, then renamed over
// `path` (and the directory fsync'ed), so a crash or an error leaves any previous file intact.
// Each tensor's CRC-32 is stored in the metadata ("crc32:<name>"; other readers ignore it).
void saveSafetensors(const std::string& path, const Checkpoint& checkpoint);

// Reads and validates a file (header length, JSON, dtypes, shapes against byte ranges, ranges
// inside the file, no overlaps, each tensor against its checksum when the file has one; the
// checksums are not returned in `metadata`). Throws spmd::Error naming the file, the tensor and
// what is wrong.
Checkpoint loadSafetensors(const std::string& path);

}  // namespace spmd::io
