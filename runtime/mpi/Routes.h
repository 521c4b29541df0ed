// Which bytes of its replicas' operands one process of a job sends each other process for a
// collective in which each replica reads only part of the others' operands (within replica groups,
// ppermute, all_to_all), and where each piece lands: only what other processes' replicas read
// crosses processes, each distinct piece once per process however many of its replicas read it.
// Every process derives the plan from the same rule, so the sender's and the receiver's orders
// agree (source replicas in rank order, their pieces by offset) and no sizes are exchanged. No MPI
// here: ProcessCommunicator moves the bytes, the unit tests move them in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace spmd::runtime {

// Part of one replica's operand.
struct BytePiece {
  size_t offset = 0, bytes = 0;  // bytes 0: nothing
};

// The part of replica `src`'s operand replica `dst` reads. Called with one of the two on this
// process; it must give the same answer on every process.
using PieceRule = std::function<BytePiece(int64_t dst, int64_t src)>;

class Routes {
 public:
  // `local` replicas per process (global rank = process * local + l), each operand `operandBytes`.
  Routes(const PieceRule& rule, int process, int processes, int local, size_t operandBytes);

  // The outbox: for each process q in order, at sendOffset(q), sendBytes(q) bytes.
  size_t sendOffset(int q) const { return sendAt_[size_t(q)]; }
  size_t sendBytes(int q) const { return sendAt_[size_t(q) + 1] - sendAt_[size_t(q)]; }
  size_t outboxBytes() const { return sendAt_.back(); }
  // The inbox: from each process q, at receiveOffset(q), receiveBytes(q) bytes.
  size_t receiveOffset(int q) const { return receiveAt_[size_t(q)]; }
  size_t receiveBytes(int q) const { return receiveAt_[size_t(q) + 1] - receiveAt_[size_t(q)]; }
  size_t inboxBytes() const { return receiveAt_.back(); }

  // Fills the outbox from the local replicas' operands (replica l's at l * operandBytes).
  void pack(const std::byte* operands, std::byte* outbox) const;
  // Where local replica l's piece of replica src lies: in `operands` when src is on this process,
  // else in `inbox`; nullptr when l reads nothing of src.
  const std::byte* piece(int l, int64_t src, const std::byte* operands, const std::byte* inbox) const;
  int processOf(int64_t rank) const { return int(rank / local_); }

 private:
  struct Sent {
    int local;  // the local replica whose operand it is cut from
    BytePiece piece;
  };
  int process_, processes_, local_;
  size_t operandBytes_;
  std::vector<std::vector<Sent>> sends_;    // what goes to each process, in outbox order
  std::vector<size_t> sendAt_, receiveAt_;  // prefix sums over processes
  // [l * replicas + src]: where l's piece of src lies, in the operands (src on this process) or
  // the inbox; -1: none.
  std::vector<int64_t> pieceAt_;
};

// A ppermute's routes: each replica reads the whole operand of its pair's source (`pairs`:
// flattened source, target pairs), so only the pairs that cross processes move.
Routes permuteRoutes(std::span<const int64_t> pairs, int process, int processes, int local, size_t operandBytes);
// An all_to_all's routes: an operand of one block per replica, block j read by replica j alone.
Routes blockRoutes(int process, int processes, int local, size_t operandBytes);

}  // namespace spmd::runtime
