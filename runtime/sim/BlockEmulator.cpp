// runBlocks: one fiber per thread of a block (Boost.Context), a scheduler that resumes them in a
// random order until all wait at the same barrier, and a shadow of the shared memory that says,
// per element, which thread last wrote and read it in which barrier interval. The fibers switch
// stacks on one host thread, so the sanitizers are told of every switch.
#include "runtime/sim/BlockEmulator.h"

#include <algorithm>
#include <boost/context/fiber.hpp>
#include <boost/context/fixedsize_stack.hpp>
#include <limits>
#include <random>

#include "runtime/base/Error.h"
#include "runtime/base/Parse.h"

#if defined(__SANITIZE_ADDRESS__)
#define SPMD_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPMD_FIBER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define SPMD_FIBER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPMD_FIBER_TSAN 1
#endif
#endif
#ifdef SPMD_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef SPMD_FIBER_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace spmd::runtime::sim {

namespace ctx = boost::context;

namespace {

uint64_t seedFromEnvironment() {
  return uint64_t(envWhole("SPMD_SIM_SEED", 0, std::numeric_limits<int64_t>::max()).value_or(1));
}

// Launches on this stream thread so far: with the seed, it makes every launch's order its own
// and reproducible (a device's launches run in order on its one stream thread).
thread_local uint64_t launchCount = 0;

struct Seeded {
  uint64_t seed, launch;
  std::mt19937_64 random;
  Seeded() : seed(seedFromEnvironment()), launch(launchCount++), random(seed * 0x9E3779B97F4A7C15ull + launch) {}
  std::string name() const {
    return "SPMD_SIM_SEED=" + std::to_string(seed) + ", launch " + std::to_string(launch) + " of this device";
  }
};

// A fiber's stack, remembered for AddressSanitizer's switch annotations.
struct Stack {
  const void* bottom = nullptr;
  size_t size = 0;
};

// The fiber stacks of this stream thread, one per thread index of a block, kept from launch to
// launch: a launch of 256 threads took 64 MiB of fresh stacks from the allocator, which under the
// sanitizers is fresh memory each time (page faults, the allocator's fill and quarantine: about
// half of a sim step's time under ASan). Thread t's stack goes to thread t of the next launch,
// whose fiber is the same one to TSan (TsanFibers). Each fiber runs to its end before its stack
// comes back (run() resumes every one until done), so no frame of it is left on the stack.
class StackPool {
 public:
  ctx::stack_context take(size_t t) {
    if (kept_.size() <= t) kept_.resize(t + 1);  // here, so that give() never allocates
    ctx::stack_context s = kept_[t];
    kept_[t] = {};
    return s.sp ? s : maker_.allocate();
  }
  void give(size_t t, ctx::stack_context s) noexcept {
    if (kept_[t].sp) maker_.deallocate(kept_[t]);
    kept_[t] = s;
  }
  ~StackPool() {
    for (ctx::stack_context& s : kept_)
      if (s.sp) maker_.deallocate(s);
  }

 private:
  ctx::fixedsize_stack maker_{256 * 1024};
  std::vector<ctx::stack_context> kept_;
};
thread_local StackPool stackPool;

struct RecordingAllocator {
  size_t thread;
  Stack* record;
  ctx::stack_context allocate() {
    ctx::stack_context s = stackPool.take(thread);
    *record = {static_cast<char*>(s.sp) - s.size, s.size};
    return s;
  }
  void deallocate(ctx::stack_context& s) noexcept { stackPool.give(thread, s); }
};

#ifdef SPMD_FIBER_TSAN
// ThreadSanitizer's contexts for fibers, kept for the stream thread's later launches: creating
// one per fiber and launch would cost TSan a thread each time.
struct TsanFibers {
  std::vector<void*> fibers;
  void* at(size_t i) {
    while (fibers.size() <= i) fibers.push_back(__tsan_create_fiber(0));
    return fibers[i];
  }
  ~TsanFibers() {
    for (void* f : fibers) __tsan_destroy_fiber(f);
  }
};
thread_local TsanFibers tsanFibers;
#endif

// Thrown into fibers when the launch has failed: unwinds each back to its entry.
struct Aborted {};

enum class State { ready, atSync, atBlockEnd, done };

// Per shared byte offset: the barrier interval (epoch) and thread of the last write and read.
struct Shadow {
  uint64_t writeEpoch = 0, readEpoch = 0;
  int writer = -1, reader = -1;  // reader -2: several threads read in readEpoch
};

}  // namespace

class GridRun {
 public:
  GridRun(const kernels::Launch& l, const std::string& where, const std::function<void(SimBlock&)>& body)
      : launch_(l), where_(where), body_(body), threads_(size_t(l.threads)), shadow_(l.dynamicShared),
        memory_(l.dynamicShared) {
    order_.resize(size_t(l.blocks));
    for (int64_t b = 0; b < l.blocks; ++b) order_[size_t(b)] = b;
    std::shuffle(order_.begin(), order_.end(), seeded_.random);
  }

  void run() {
#ifdef SPMD_FIBER_TSAN
    schedulerTsan_ = __tsan_get_current_fiber();
#endif
    for (int t = 0; t < launch_.threads; ++t) start(t);
    std::vector<int> turn(threads_.size());
    for (size_t t = 0; t < turn.size(); ++t) turn[t] = int(t);
    for (;;) {
      std::shuffle(turn.begin(), turn.end(), seeded_.random);
      for (int t : turn)
        if (threads_[size_t(t)].state != State::done) resume(t);
      if (!error_.empty()) break;
      size_t atSync = 0, atEnd = 0, done = 0;
      for (const Thread& t : threads_) (t.state == State::atSync ? atSync : t.state == State::atBlockEnd ? atEnd : done)++;
      if (done == threads_.size()) break;
      if (atSync != 0 && atSync != threads_.size()) {
        fail("a barrier (__syncthreads) that only " + std::to_string(atSync) + " of the block's " +
             std::to_string(threads_.size()) + " threads reached; the others " +
             (done ? "left the kernel" : "ended the block") + ": every thread of a block must reach each barrier");
        break;
      }
      ++epoch_;
      if (atEnd) blockStart_ = epoch_;  // the next block's shared memory holds nothing it wrote
      for (Thread& t : threads_) t.state = State::ready;
    }
    if (!error_.empty()) {
      aborting_ = true;
      for (int t = 0; t < launch_.threads; ++t)
        while (threads_[size_t(t)].state != State::done) resume(t);
    }
    if (!error_.empty())
      throw Error("sim: kernel " + std::string(launch_.kernel) + " (" + where_ + "), " + error_ + " (" +
                  seeded_.name() + ")");
  }

  std::byte* access(SimBlock& b, size_t offset, size_t size, bool write) {
    const int t = b.thread_;
    auto failAccess = [&](const std::string& why) {
      fail("thread " + std::to_string(t) + " of block " + std::to_string(b.block_) + (write ? " writes" : " reads") +
           " shared byte " + std::to_string(offset) + why);
      throw Aborted{};
    };
    if (offset + size > memory_.size() || offset + size < offset)
      failAccess(", past the launch's " + std::to_string(memory_.size()) + " bytes of shared memory");
    Shadow& s = shadow_[offset];
    const char* race = " since the last barrier (__syncthreads): a shared-memory race";
    if (s.writeEpoch == epoch_ && s.writer != t) failAccess(", which thread " + std::to_string(s.writer) + " wrote" + race);
    if (write && s.readEpoch == epoch_ && s.reader != t)
      failAccess(s.reader == -2 ? std::string(", which other threads read") + race
                                : ", which thread " + std::to_string(s.reader) + " read" + race);
    if (!write && s.writeEpoch < blockStart_) failAccess(", which no thread of its block has written");
    if (write) {
      s.writeEpoch = epoch_, s.writer = t;
    } else if (s.readEpoch != epoch_) {
      s.readEpoch = epoch_, s.reader = t;
    } else if (s.reader != t) {
      s.reader = -2;
    }
    return memory_.data() + offset;
  }

  // In a fiber: hands control back to the scheduler as `state`; throws Aborted when the launch failed.
  void yield(int t, State state) {
    Thread& th = threads_[size_t(t)];
    th.state = state;
#ifdef SPMD_FIBER_TSAN
    __tsan_switch_to_fiber(schedulerTsan_, 0);
#endif
#ifdef SPMD_FIBER_ASAN
    __sanitizer_start_switch_fiber(&th.fakeStack, scheduler_.bottom, scheduler_.size);
#endif
    th.scheduler = std::move(th.scheduler).resume();
#ifdef SPMD_FIBER_ASAN
    __sanitizer_finish_switch_fiber(th.fakeStack, &scheduler_.bottom, &scheduler_.size);
#endif
    if (aborting_) throw Aborted{};
  }

  const kernels::Launch& launch() const { return launch_; }

 private:
  struct Thread {
    ctx::fiber fiber, scheduler;  // scheduler: the continuation back to run(), inside the fiber
    Stack stack;
    State state = State::ready;
    void* fakeStack = nullptr;
    void* tsan = nullptr;
    SimBlock view;
  };

  void fail(const std::string& why) {
    if (error_.empty()) error_ = why;
  }

  void start(int t) {
    Thread& th = threads_[size_t(t)];
    th.view.grid_ = this, th.view.thread_ = t;
#ifdef SPMD_FIBER_TSAN
    th.tsan = tsanFibers.at(size_t(t));
#endif
    th.fiber = ctx::fiber(std::allocator_arg, RecordingAllocator{size_t(t), &th.stack}, [this, t](ctx::fiber&& back) {
      Thread& self = threads_[size_t(t)];
      self.scheduler = std::move(back);
#ifdef SPMD_FIBER_ASAN
      __sanitizer_finish_switch_fiber(nullptr, &scheduler_.bottom, &scheduler_.size);
#endif
      try {
        for (size_t b = 0; b < order_.size(); ++b) {
          self.view.block_ = order_[b];
          body_(self.view);
          if (b + 1 < order_.size()) yield(t, State::atBlockEnd);
        }
      } catch (const Aborted&) {
      } catch (const std::exception& e) {
        fail("thread " + std::to_string(t) + " of block " + std::to_string(self.view.block_) + ": " + e.what());
      }
      self.state = State::done;
#ifdef SPMD_FIBER_TSAN
      __tsan_switch_to_fiber(schedulerTsan_, 0);
#endif
#ifdef SPMD_FIBER_ASAN
      __sanitizer_start_switch_fiber(nullptr, scheduler_.bottom, scheduler_.size);
#endif
      return std::move(self.scheduler);
    });
  }

  void resume(int t) {
    Thread& th = threads_[size_t(t)];
    void* fake = nullptr;
    (void)fake;
#ifdef SPMD_FIBER_TSAN
    __tsan_switch_to_fiber(th.tsan, 0);
#endif
#ifdef SPMD_FIBER_ASAN
    __sanitizer_start_switch_fiber(&fake, th.stack.bottom, th.stack.size);
#endif
    th.fiber = std::move(th.fiber).resume();
#ifdef SPMD_FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  }

  kernels::Launch launch_;
  const std::string& where_;
  const std::function<void(SimBlock&)>& body_;
  Seeded seeded_;
  std::vector<int64_t> order_;
  std::vector<Thread> threads_;
  std::vector<Shadow> shadow_;
  std::vector<std::byte> memory_;
  uint64_t epoch_ = 1, blockStart_ = 1;
  std::string error_;
  bool aborting_ = false;
  Stack scheduler_;
  void* schedulerTsan_ = nullptr;
};

int SimBlock::blockSize() const { return grid_->launch().threads; }
int64_t SimBlock::gridSize() const { return grid_->launch().blocks; }
void SimBlock::sync() { grid_->yield(thread_, State::atSync); }
std::byte* SimBlock::access(size_t offset, size_t size, bool write) { return grid_->access(*this, offset, size, write); }

void runBlocks(const kernels::Launch& launch, const std::string& where, const std::function<void(SimBlock&)>& body) {
  GridRun(launch, where, body).run();
}

GridOrder gridStrideOrder(const kernels::Launch& launch) {
  Seeded seeded;
  GridOrder order{std::vector<long long>(size_t(launch.blocks)), std::vector<int>(size_t(launch.threads))};
  for (size_t b = 0; b < order.blocks.size(); ++b) order.blocks[b] = (long long)b;
  for (size_t t = 0; t < order.threads.size(); ++t) order.threads[t] = int(t);
  std::shuffle(order.blocks.begin(), order.blocks.end(), seeded.random);
  std::shuffle(order.threads.begin(), order.threads.end(), seeded.random);
  return order;
}

}  // namespace spmd::runtime::sim
