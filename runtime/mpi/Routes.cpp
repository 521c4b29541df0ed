// Routes: the pieces each process sends, and where each piece a local replica reads lies.
#include "runtime/mpi/Routes.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "runtime/program/Catalog.h"

namespace spmd::runtime {

namespace {
bool pieceBefore(const BytePiece& a, const BytePiece& b) { return std::tie(a.offset, a.bytes) < std::tie(b.offset, b.bytes); }
bool samePiece(const BytePiece& a, const BytePiece& b) { return a.offset == b.offset && a.bytes == b.bytes; }
}  // namespace

Routes::Routes(const PieceRule& rule, int process, int processes, int local, size_t operandBytes)
    : process_(process), processes_(processes), local_(local), operandBytes_(operandBytes) {
  const int64_t replicas = int64_t(processes) * local, first = int64_t(process) * local;
  // The distinct pieces of `src` that the replicas [begin, end) read, by offset.
  auto piecesOf = [&](int64_t src, int64_t begin, int64_t end) {
    std::vector<BytePiece> pieces;
    for (int64_t dst = begin; dst < end; ++dst) {
      const BytePiece p = rule(dst, src);
      if (p.bytes > 0) pieces.push_back(p);
    }
    std::sort(pieces.begin(), pieces.end(), pieceBefore);
    pieces.erase(std::unique(pieces.begin(), pieces.end(), samePiece), pieces.end());
    return pieces;
  };
  // Sends: to each other process, each local replica's pieces that process's replicas read.
  sends_.assign(size_t(processes), {});
  sendAt_.assign(size_t(processes) + 1, 0);
  for (int q = 0; q < processes; ++q) {
    size_t bytes = 0;
    if (q != process)
      for (int l = 0; l < local; ++l)
        for (const BytePiece& p : piecesOf(first + l, int64_t(q) * local, int64_t(q + 1) * local)) {
          sends_[size_t(q)].push_back({l, p});
          bytes += p.bytes;
        }
    sendAt_[size_t(q) + 1] = sendAt_[size_t(q)] + bytes;
  }
  // Receives: from each other process, its replicas' pieces the local replicas read, in the
  // order it sends them; and where each local replica's piece of every source lies.
  pieceAt_.assign(size_t(local) * size_t(replicas), -1);
  receiveAt_.assign(size_t(processes) + 1, 0);
  size_t at = 0;
  for (int q = 0; q < processes; ++q) {
    receiveAt_[size_t(q)] = at;
    for (int64_t src = int64_t(q) * local; src < int64_t(q + 1) * local; ++src) {
      if (q == process) {
        for (int l = 0; l < local; ++l)
          if (const BytePiece p = rule(first + l, src); p.bytes > 0)
            pieceAt_[size_t(l) * size_t(replicas) + size_t(src)] = int64_t(size_t(src - first) * operandBytes + p.offset);
        continue;
      }
      const std::vector<BytePiece> pieces = piecesOf(src, first, first + local);
      for (int l = 0; l < local; ++l) {
        const BytePiece p = rule(first + l, src);
        if (p.bytes == 0) continue;
        size_t offset = at;
        for (const BytePiece& q2 : pieces) {
          if (samePiece(q2, p)) break;
          offset += q2.bytes;
        }
        pieceAt_[size_t(l) * size_t(replicas) + size_t(src)] = int64_t(offset);
      }
      for (const BytePiece& p : pieces) at += p.bytes;
    }
  }
  receiveAt_[size_t(processes)] = at;
}

void Routes::pack(const std::byte* operands, std::byte* outbox) const {
  for (int q = 0; q < processes_; ++q) {
    std::byte* to = outbox + sendOffset(q);
    for (const Sent& s : sends_[size_t(q)]) {
      std::memcpy(to, operands + size_t(s.local) * operandBytes_ + s.piece.offset, s.piece.bytes);
      to += s.piece.bytes;
    }
  }
}

const std::byte* Routes::piece(int l, int64_t src, const std::byte* operands, const std::byte* inbox) const {
  const int64_t at = pieceAt_[size_t(l) * size_t(int64_t(processes_) * local_) + size_t(src)];
  if (at < 0) return nullptr;
  return (processOf(src) == process_ ? operands : inbox) + at;
}

Routes permuteRoutes(std::span<const int64_t> pairs, int process, int processes, int local, size_t operandBytes) {
  std::vector<int64_t> sourceOf(size_t(processes) * size_t(local), -1);
  for (size_t r = 0; r < sourceOf.size(); ++r) sourceOf[r] = ppermuteSource(pairs, int64_t(r));
  return Routes([&](int64_t dst, int64_t src) { return sourceOf[size_t(dst)] == src ? BytePiece{0, operandBytes} : BytePiece{}; },
                process, processes, local, operandBytes);
}

Routes blockRoutes(int process, int processes, int local, size_t operandBytes) {
  const size_t block = operandBytes / (size_t(processes) * size_t(local));
  return Routes([&](int64_t dst, int64_t) { return BytePiece{size_t(dst) * block, block}; }, process, processes, local,
                operandBytes);
}

}  // namespace spmd::runtime
