// Kernels chosen by measurement, the same in every process and in every run on one device kind,
// as XLA's autotuner and cuDNN's benchmark mode choose, but reproducibly. For one op on one set
// of shapes a backend offers variants (cuDNN's algorithms or engines, the CPU's oneDNN, Winograd,
// strided kernels); the choice:
//   - a variant pinned by name (SPMD_KERNELS=conv2d:onednn,...) wins where it runs (a backend
//     with a fixed list names all its variants: a pinned one that does not run on this step
//     leaves the step to the rules below); an unknown name is refused, listing the valid ones;
//   - only variants whose bits repeat run (cuDNN's nondeterministic ones never), and in strict
//     f32 none that rounds to TF32 on tensor cores;
//   - a choice made before for the same device kind, library version, op and shapes is taken
//     without timing (kept in memory, and across runs in kernel-choices.json in the kernel cache,
//     $SPMD_KERNEL_CACHE, runtime/base/KernelCache.h); a choice the file holds for another device
//     kind is not used, and the log says so; processes sharing the file take it under a lock
//     and read it again before timing, so the first to time a key decides it for all of them;
//   - else the allowed variants are timed and the fastest taken (the first of equals); where
//     other processes kept the machine's cores busy meanwhile (runtime/base/MachineLoad.h), the
//     choice says so and a warning names the file to delete to time it again;
//   - in a job of several processes process 0 chooses and every other process takes its choice
//     (refused, naming both, when process 0 runs another device kind), so every replica runs the
//     same kernels and the bits promise holds.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace spmd::runtime {

struct Variant {
  std::string name;           // as the backend lists and a pin names it ("1", "winograd")
  bool deterministic = true;  // the same bits on every run (no atomics in its sums)
  bool tensorCores = false;   // rounds f32 inputs to TF32
};

// What a choice is for: everything a kernel's speed depends on.
struct ChoiceKey {
  std::string device;   // "NVIDIA H100 80GB HBM3 (sm_90)"
  std::string library;  // "cuDNN 91000"
  std::string op;       // "conv2d": the step's op, what pins name
  std::string shapes;   // dtypes, shapes and attributes, e.g. "f32 x[64, 1, 28, 28] w[...] stride 1 1"
};

// How process 0's choices reach the other processes of a job.
class ChoiceExchange {
 public:
  virtual ~ChoiceExchange() = default;
  virtual int rank() const = 0;
  // Process 0's `text` on every process (every process calls it, in the same order).
  virtual std::string fromProcessZero(const std::string& text) = 0;
};

class Job;
struct MachineLoad;
// The processes of `job` as a ChoiceExchange (its broadcast); null for a job of one process.
std::unique_ptr<ChoiceExchange> exchangeOf(const Job& job);

struct Choice {
  enum class From { Pinned, Remembered, Timed, ProcessZero };
  std::string variant;
  From from = From::Timed;
  std::string why;  // one line for SPMD_LOG_COMPILES
};

class KernelChoices {
 public:
  // `path`: the file of persisted choices (read now when it exists, rewritten atomically after
  // each new choice); empty: choices are kept for this process only. Throws naming the file when
  // it is not one this class wrote.
  explicit KernelChoices(std::string path = {});
  // Pins from text "op:variant,op:variant" (SPMD_KERNELS); throws on a malformed entry.
  void pin(const std::string& text);
  bool pinned(const std::string& op) const;
  std::string pinOf(const std::string& op) const;  // "" when `op` has no pin
  // The variant to run for `key` among `candidates` (see the header). `time` gets the allowed
  // candidates and returns their seconds (NaN or infinity: could not run). `exchange`: the job's
  // processes, or null for this process alone. `known`: every variant the backend has for the
  // op (empty: the candidates are all of them), so a pin naming one that does not run here is
  // passed over instead of refused.
  Choice choose(const ChoiceKey& key, const std::vector<Variant>& candidates, bool strictF32,
                const std::function<std::vector<double>(const std::vector<Variant>&)>& time,
                ChoiceExchange* exchange = nullptr, const std::vector<std::string>& known = {});
  // The pins as "op:variant,..." (sorted by op), and all of them replaced by `text` (tests;
  // `text` as pin() takes it).
  std::string pins() const;
  void setPins(const std::string& text);
  // The choices this process made or read, by key text (tests, spmd-run).
  std::map<std::string, std::string> remembered() const;
  // The timed, remembered and process-0 choices this process's steps ran, as JSON text (a
  // checkpoint records them), and `text` of that form taken as this process's choices for those
  // keys before any other (a resumed run runs the kernels the checkpoint's run ran; keys of
  // another device kind are never looked up). adopt returns how many it took; both throw naming
  // `what` when `text` is not of that form.
  std::string used() const;
  int adopt(const std::string& text, const std::string& what);
  // Where the choices `now` (used()'s form) differ from `before`: "" when every key of `now` ran
  // the variant `before` holds for it, else one line naming up to three keys and why.
  static std::string differences(const std::string& before, const std::string& now, const std::string& what);
  // The process's choices: the kernel cache's kernel-choices.json and SPMD_KERNELS's pins, read on
  // first use.
  static KernelChoices& process();

 private:
  struct Entry {
    ChoiceKey key;
    std::string variant;
    double seconds = 0;
    bool processZero = false;  // sent by process 0 of this job
    mutable std::string json = {};  // its line of the file, once written (save)
  };
  void save() const;     // with mutex_ held and the file's lock taken
  // "" when `load` (over a timing) did not take cores from this process; else the choice's note,
  // and a warning on stderr the first time, naming the file to delete (with mutex_ held).
  std::string underLoad(const MachineLoad& load);
  // Adds the file's entries this process does not have (with mutex_ held); skips the parse where
  // the file is the one this process last read or wrote (its stamp: device, inode, size, change
  // and modification times), as it is before each timing unless another process wrote it.
  void readFile();
  std::vector<int64_t> fileStamp() const;  // empty where the file is not there
  mutable std::mutex mutex_;
  std::string path_;
  mutable std::vector<int64_t> stamp_;  // of the file as this process last read or wrote it
  std::map<std::string, std::string> pins_;  // op -> variant
  std::map<std::string, Entry> entries_;     // by keyText
  std::set<std::string> agreed_;             // keys exchanged with the job's processes
  std::set<std::string> used_;               // keys whose choice a step of this process took
  bool warnedLoad_ = false;                  // underLoad's warning was printed
};

// "device | library | op | shapes": the key as one line.
std::string keyText(const ChoiceKey& key);

}  // namespace spmd::runtime
