// checkProcessesAgree and the drift check (checkReplicasAgree).
#include "frontend/Agreement.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

#include "runtime/base/Checksum.h"
#include "runtime/base/Error.h"
#include "runtime/mpi/Processes.h"
#include "runtime/exec/DeviceArray.h"

namespace spmd {
namespace {

// Facts as text: "name\x1fvalue\x1e" each.
std::string encode(const Facts& facts) {
  std::string text;
  for (const auto& [name, value] : facts) text += name + '\x1f' + value + '\x1e';
  return text;
}

Facts decode(const std::string& text) {
  Facts facts;
  for (size_t start = 0, end; (end = text.find('\x1e', start)) != std::string::npos; start = end + 1) {
    std::string item = text.substr(start, end - start);
    size_t bar = item.find('\x1f');
    facts.emplace_back(item.substr(0, bar), bar == std::string::npos ? "" : item.substr(bar + 1));
  }
  return facts;
}

std::string valueText(DType dtype, const std::byte* data, int64_t i) {
  char text[64];
  switch (dtype) {
    case DType::f32: {
      float v;
      std::memcpy(&v, data + i * 4, 4);
      std::snprintf(text, sizeof text, "%.9g", double(v));
      break;
    }
    case DType::f64: {
      double v;
      std::memcpy(&v, data + i * 8, 8);
      std::snprintf(text, sizeof text, "%.17g", v);
      break;
    }
    case DType::bf16: {
      bf16 v;
      std::memcpy(&v, data + i * 2, 2);
      std::snprintf(text, sizeof text, "%.4g", double(fromBf16(v)));
      break;
    }
    case DType::i32: {
      int32_t v;
      std::memcpy(&v, data + i * 4, 4);
      std::snprintf(text, sizeof text, "%d", v);
      break;
    }
  }
  return text;
}

// The first element where `a` and `b` differ, or -1.
int64_t firstDifference(const std::byte* a, const std::byte* b, size_t bytes, size_t element) {
  if (std::memcmp(a, b, bytes) == 0) return -1;
  for (size_t i = 0; i < bytes; i += element)
    if (std::memcmp(a + i, b + i, element) != 0) return int64_t(i / element);
  return -1;
}

}  // namespace

std::string checksumText(const void* data, size_t bytes) {
  return runtime::crc32Text({static_cast<const std::byte*>(data), bytes});
}

void checkProcessesAgree(const Facts& facts, const std::string& what) {
  const auto& job = runtime::processes();
  if (job.size == 1) return;
  std::vector<std::string> all = runtime::processAllGatherText(encode(facts), what);
  std::vector<Facts> byProcess;
  for (const auto& text : all) byProcess.push_back(decode(text));
  std::vector<std::map<std::string, std::string>> maps;
  for (const auto& f : byProcess) maps.emplace_back(f.begin(), f.end());
  std::string differences;
  int shown = 0, total = 0;
  for (const auto& [name, value0] : byProcess[0])
    for (size_t p = 1; p < maps.size(); ++p) {
      auto it = maps[p].find(name);
      std::string mine = it == maps[p].end() ? std::string() : it->second;
      if (it != maps[p].end() && mine == value0) continue;
      ++total;
      if (shown++ >= 4) continue;
      std::string line;
      if (it == maps[p].end())
        line = "process " + std::to_string(p) + " has no " + name + " (process 0 has " + value0 + ")";
      else if (name.rfind("replicated input ", 0) == 0)
        line = name + " differs between process 0 and process " + std::to_string(p) + " (checksum " + value0 +
               " vs " + mine + ")";
      else
        line = "process " + std::to_string(p) + " has " + name + " = " + mine + ", process 0 has " + value0;
      differences += "\n  " + line;
    }
  for (size_t p = 1; p < maps.size(); ++p)
    for (const auto& [name, value] : byProcess[p])
      if (!maps[0].count(name)) {
        ++total;
        if (shown++ < 4) differences += "\n  process " + std::to_string(p) + " has " + name + " = " + value +
                                        ", process 0 has none";
      }
  if (total == 0) return;
  if (total > 4) differences += "\n  (and " + std::to_string(total - 4) + " more)";
  throw Error(what + ": the " + std::to_string(job.size) + " processes of this job disagree, so they would not run " +
              "one SPMD program:" + differences +
              "\nstart every process with the same flags, seed and inputs (replicated values must be equal "
              "everywhere: initialize them from the same seed or load the same checkpoint)");
}

void checkReplicasAgree(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& what) {
  const auto& job = runtime::processes();
  std::string problems;
  Facts sums;
  std::vector<std::vector<std::byte>> firstCopies;
  for (const auto& [name, tensor] : tensors) {
    const auto& resident = tensor.resident();
    if (!resident || resident->layout() != runtime::DeviceArray::Layout::Replicated) {
      firstCopies.emplace_back();
      sums.emplace_back(name, "host");
      continue;
    }
    const size_t element = dtypeSize(resident->dtype());
    std::vector<std::byte> first = resident->replicaBytes(0);
    for (int r = 1; r < resident->replicas(); ++r) {
      std::vector<std::byte> other = resident->replicaBytes(r);
      int64_t at = firstDifference(first.data(), other.data(), first.size(), element);
      if (at >= 0 && problems.empty())
        problems = "replicated tensor '" + name + "' differs between replica " +
                   std::to_string(job.rank * resident->replicas()) + " and replica " +
                   std::to_string(job.rank * resident->replicas() + r) +
                   (job.size > 1 ? " (" + job.describe() + ")" : std::string()) + ": first at element " +
                   std::to_string(at) + " (" + valueText(resident->dtype(), first.data(), at) + " vs " +
                   valueText(resident->dtype(), other.data(), at) + ")";
    }
    sums.emplace_back(name, checksumText(first.data(), first.size()));
    firstCopies.push_back(std::move(first));
  }
  // Across processes: every process learns every process's local verdict and checksums, so
  // all of them fail together, with the same message.
  // Entry 0: the local verdict; entry 1 + t: tensor t's checksum.
  sums.insert(sums.begin(), {"verdict", problems});
  std::vector<Facts> verdicts;
  for (const std::string& text : runtime::processAllGatherText(encode(sums), what)) verdicts.push_back(decode(text));
  for (const Facts& v : verdicts)
    if (!v[0].second.empty())
      throw Error(what + ": " + v[0].second + "; replicated state must be the same bits on every replica (a kernel "
                  "that is not deterministic, memory corrupted, or a replica given other inputs)");
  if (job.size == 1) return;
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (size_t p = 1; p < verdicts.size(); ++p) {
      if (verdicts[p][1 + t].second == verdicts[0][1 + t].second) continue;
      // Find the first differing element: process 0's copy to everyone, each compares its own.
      std::vector<std::byte> reference = firstCopies[t];
      runtime::processBroadcast(reference, what + " (" + tensors[t].first + ")");
      const auto& resident = tensors[t].second.resident();
      int64_t at = firstDifference(reference.data(), firstCopies[t].data(), reference.size(), dtypeSize(resident->dtype()));
      std::string mine = at < 0 ? "" : std::to_string(at) + " " + valueText(resident->dtype(), reference.data(), at) +
                                           " " + valueText(resident->dtype(), firstCopies[t].data(), at);
      std::vector<std::string> where = runtime::processAllGatherText(mine, what + " (first difference)");
      std::istringstream in(where[p]);
      std::string index, a, b;
      in >> index >> a >> b;
      const int K = resident->replicas();
      throw Error(what + ": replicated tensor '" + tensors[t].first + "' differs between replica 0 (process 0) and "
                  "replica " + std::to_string(p * K) + " (process " + std::to_string(p) + "): first at element " +
                  index + " (" + a + " vs " + b + "); replicated state must be the same bits on every replica (a "
                  "kernel that is not deterministic, memory corrupted, or a process given other inputs)");
    }
  }
}

void checkReplicasAgree(const Tree& tree, const std::string& prefix, const std::string& what) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : tree) tensors.emplace_back(prefix + name, t);
  checkReplicasAgree(tensors, what);
}

}  // namespace spmd
