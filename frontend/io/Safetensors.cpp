// safetensors read/write with nlohmann::json for the header; written atomically (runtime/AtomicFile).
#include "frontend/io/Safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/base/AtomicFile.h"
#include "runtime/base/Checksum.h"
#include "runtime/base/InputFile.h"

namespace spmd::io {
namespace {

const char* codeOf(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::bf16: return "BF16";
  }
  return "";
}

std::string fail(const std::string& path, const std::string& what) {
  return path + ": not a valid safetensors checkpoint: " + what;
}

// Each tensor's CRC-32 goes into the metadata as "crc32:<name>" (8 hex digits), each metadata
// field's as "crc32-meta:<key>", and the tensor table's (names, dtypes, shapes, in order) as
// "crc32-table": other readers (PyTorch's safetensors) ignore them, and loadSafetensors verifies
// them, so an edited epoch or shape is refused naming what changed.
const std::string kChecksumKey = "crc32:";
const std::string kMetaChecksumKey = "crc32-meta:";
const std::string kTableChecksumKey = "crc32-table";

std::string checksumOf(const Array& array) {
  return runtime::crc32Text({array.data(), array.bytes()});
}

std::string checksumOf(const std::string& text) {
  return runtime::crc32Text(std::as_bytes(std::span(text.data(), text.size())));
}

// The table a header's tensors make: "name dtype [d0,d1,...];" each, in name order.
std::string tableText(const std::map<std::string, Array>& tensors) {
  std::string text;
  for (const auto& [name, array] : tensors) {
    text += name + " " + codeOf(array.dtype) + " [";
    for (size_t i = 0; i < array.shape.size(); ++i) text += (i ? "," : "") + std::to_string(array.shape[i]);
    text += "];";
  }
  return text;
}

}  // namespace

void saveSafetensors(const std::string& path, const Checkpoint& checkpoint) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::map<std::string, std::string> metadata = checkpoint.metadata;
  for (const auto& [key, value] : checkpoint.metadata) metadata[kMetaChecksumKey + key] = checksumOf(value);
  for (const auto& [name, array] : checkpoint.tensors) metadata[kChecksumKey + name] = checksumOf(array);
  metadata[kTableChecksumKey] = checksumOf(tableText(checkpoint.tensors));
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const auto& [name, array] : checkpoint.tensors) {
    header[name] = {{"dtype", codeOf(array.dtype)},
                    {"shape", array.shape},
                    {"data_offsets", {offset, offset + array.bytes()}}};
    offset += array.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  uint64_t length = text.size();  // little-endian on every platform we build for

  std::vector<std::span<const std::byte>> parts = {
      std::as_bytes(std::span(&length, 1)), std::as_bytes(std::span(text.data(), text.size()))};
  for (const auto& [name, array] : checkpoint.tensors) parts.push_back({array.data(), array.bytes()});
  writeFileAtomically(path, parts);
}

namespace {

// A header list of whole numbers >= 0 ("shape", "data_offsets"). JSON numbers beyond uint64 parse
// as floats, and converting those (or negative ones) would be undefined: refused by name here.
std::vector<uint64_t> wholeNumbers(const nlohmann::json& list, const std::string& path, const std::string& what) {
  if (!list.is_array()) throw Error(fail(path, what + " is not a list"));
  std::vector<uint64_t> out;
  for (const nlohmann::json& v : list) {
    if (!v.is_number_unsigned())
      throw Error(fail(path, what + " holds " + v.dump().substr(0, 40) + ", not a whole number from 0 to 2^64 - 1"));
    out.push_back(v.get<uint64_t>());
  }
  return out;
}

}  // namespace

Checkpoint loadSafetensors(const std::string& path) {
  requireRegularFile(path, "checkpoint", "name the .safetensors file in it");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open checkpoint (" + std::strerror(errno) + ")");
  in.seekg(0, std::ios::end);
  const std::streamoff end = in.tellg();
  if (end < 0) throw Error(path + ": cannot find the checkpoint's size (" + std::strerror(errno) + ")");
  const uint64_t size = static_cast<uint64_t>(end);
  in.seekg(0);
  uint64_t length = 0;
  if (size < 8 || !in.read(reinterpret_cast<char*>(&length), 8))
    throw Error(fail(path, "the file has " + std::to_string(size) + " bytes, fewer than the 8-byte header length"));
  if (length > size - 8 || length > (100u << 20))
    throw Error(fail(path, "the header length " + std::to_string(length) + " exceeds the file (" +
                               std::to_string(size) + " bytes): truncated or not safetensors"));
  std::string text(length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(length));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fail(path, std::string("the header is not valid JSON (") + e.what() + ")"));
  }
  if (!header.is_object()) throw Error(fail(path, "the header is not a JSON object"));
  const uint64_t dataBytes = size - 8 - length;
  Checkpoint checkpoint;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw Error(fail(path, "__metadata__ is not an object"));
      for (auto& [key, value] : entry.items()) {
        if (!value.is_string()) throw Error(fail(path, "metadata '" + key + "' is not a string"));
        checkpoint.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    try {
      std::string code = entry.at("dtype").get<std::string>();
      DType dtype = code == "F32" ? DType::f32 : code == "F64" ? DType::f64 : code == "I32" ? DType::i32
                  : code == "BF16" ? DType::bf16
                  : throw Error(fail(path, "tensor '" + name + "' has dtype " + code +
                                               "; spmd reads F32, F64, BF16 and I32"));
      const std::vector<uint64_t> dims = wholeNumbers(entry.at("shape"), path, "tensor '" + name + "' shape");
      const std::vector<uint64_t> offsets = wholeNumbers(entry.at("data_offsets"), path, "tensor '" + name + "' data_offsets");
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > dataBytes)
        throw Error(fail(path, "tensor '" + name + "' has data_offsets outside the " +
                                   std::to_string(dataBytes) + " data bytes (truncated file?)"));
      // The shape's bytes, checked against the range before anything is allocated (no overflow:
      // a product past the range stops the loop).
      Shape shape;
      uint64_t bytes = dtypeSize(dtype);
      for (uint64_t d : dims) {
        shape.push_back(static_cast<int64_t>(std::min<uint64_t>(d, uint64_t(INT64_MAX))));
        if (bytes != 0 && d > (offsets[1] - offsets[0]) / bytes) {
          bytes = UINT64_MAX;
          break;
        }
        bytes *= d;
      }
      if (bytes != offsets[1] - offsets[0])
        throw Error(fail(path, "tensor '" + name + "' has shape " + entry.at("shape").dump().substr(0, 80) + " " + code +
                                   ", which does not fit its " + std::to_string(offsets[1] - offsets[0]) + " bytes"));
      Array array = Array::zeros(dtype, shape);
      if (offsets[1] - offsets[0] != array.bytes())
        throw Error(fail(path, "tensor '" + name + "' is " + shapeString(shape) + " " + code + " (" +
                                   std::to_string(array.bytes()) + " bytes) but its range holds " +
                                   std::to_string(offsets[1] - offsets[0])));
      in.seekg(static_cast<std::streamoff>(8 + length + offsets[0]));
      if (!in.read(reinterpret_cast<char*>(array.data()), static_cast<std::streamsize>(array.bytes())))
        throw Error(fail(path, "tensor '" + name + "' could not be read"));
      ranges.emplace_back(offsets[0], offsets[1]);
      checkpoint.tensors[name] = std::move(array);
    } catch (const nlohmann::json::exception& e) {
      throw Error(fail(path, "tensor '" + name + "' entry is malformed (" + e.what() + ")"));
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) throw Error(fail(path, "two tensors' byte ranges overlap"));
  // The header against its checksums where it has them (files from other writers, and spmd's
  // before they were written, have none): the tensor table, then every metadata field.
  const std::string changed = ": the file was changed or damaged after it was written; restore it from a copy, or "
                              "train again";
  if (auto table = checkpoint.metadata.find(kTableChecksumKey); table != checkpoint.metadata.end()) {
    if (checksumOf(tableText(checkpoint.tensors)) != table->second)
      throw Error(fail(path, "its tensor table (names, dtypes, shapes) does not match its checksum" + changed));
    for (const auto& [name, _] : checkpoint.tensors)
      if (!checkpoint.metadata.count(kChecksumKey + name))
        throw Error(fail(path, "tensor '" + name + "' has no checksum" + changed));
    checkpoint.metadata.erase(table);
    std::map<std::string, std::string> fields;
    for (const auto& [key, value] : checkpoint.metadata)
      if (key.rfind(kChecksumKey, 0) != 0 && key.rfind(kMetaChecksumKey, 0) != 0) fields[key] = value;
    for (const auto& [key, value] : fields) {
      auto sum = checkpoint.metadata.find(kMetaChecksumKey + key);
      if (sum == checkpoint.metadata.end())
        throw Error(fail(path, "metadata '" + key + "' has no checksum" + changed));
      if (checksumOf(value) != sum->second)
        throw Error(fail(path, "metadata '" + key + "' (\"" + value.substr(0, 60) + "\") does not match its checksum" +
                                   changed));
    }
    for (auto it = checkpoint.metadata.begin(); it != checkpoint.metadata.end();) {
      if (it->first.rfind(kMetaChecksumKey, 0) != 0) {
        ++it;
        continue;
      }
      if (!fields.count(it->first.substr(kMetaChecksumKey.size())))
        throw Error(fail(path, "metadata '" + it->first.substr(kMetaChecksumKey.size()) + "' is missing" + changed));
      it = checkpoint.metadata.erase(it);
    }
  }
  // Every tensor against its checksum, then the checksums leave the metadata the caller sees.
  for (auto it = checkpoint.metadata.begin(); it != checkpoint.metadata.end();) {
    if (it->first.rfind(kChecksumKey, 0) != 0) {
      ++it;
      continue;
    }
    std::string name = it->first.substr(kChecksumKey.size());
    auto tensor = checkpoint.tensors.find(name);
    if (tensor == checkpoint.tensors.end())
      throw Error(fail(path, "it has a checksum for tensor '" + name + "' but no such tensor (damaged?)"));
    if (checksumOf(tensor->second) != it->second)
      throw Error(fail(path, "tensor '" + name + "' does not match its checksum (CRC-32 " + checksumOf(tensor->second) +
                             ", written " + it->second + "): the file was changed or damaged after it was written"));
    it = checkpoint.metadata.erase(it);
  }
  return checkpoint;
}

}  // namespace spmd::io
