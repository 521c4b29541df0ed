// KernelChoices: pins, remembered and persisted choices, timing, process 0's choice for all.
#include "runtime/device/KernelChoice.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/base/AtomicFile.h"
#include "runtime/base/Error.h"
#include "runtime/base/KernelCache.h"
#include "runtime/base/MachineLoad.h"
#include "runtime/device/Job.h"

namespace spmd::runtime {
namespace {

using Json = nlohmann::ordered_json;

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& n : names) text += (text.empty() ? "" : ", ") + n;
  return text;
}

std::string namesOf(const std::vector<Variant>& variants) {
  std::string text;
  for (const Variant& v : variants) text += (text.empty() ? "" : ", ") + v.name;
  return text.empty() ? "none" : text;
}

// Why `v` may not run: "" when it may.
std::string refusal(const Variant& v, bool strictF32) {
  if (!v.deterministic) return "its bits differ between runs (nondeterministic)";
  if (strictF32 && v.tensorCores) return "it rounds f32 to TF32 on tensor cores (SPMD_ALLOW_TF32=1 allows it)";
  return "";
}

const Variant* find(const std::vector<Variant>& variants, const std::string& name) {
  for (const Variant& v : variants)
    if (v.name == name) return &v;
  return nullptr;
}

}  // namespace

std::string keyText(const ChoiceKey& key) {
  return key.device + " | " + key.library + " | " + key.op + " | " + key.shapes;
}

KernelChoices::KernelChoices(std::string path) : path_(std::move(path)) {
  if (!path_.empty()) readFile();
}

std::vector<int64_t> KernelChoices::fileStamp() const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return {};
  return {int64_t(st.st_dev), int64_t(st.st_ino), int64_t(st.st_size), int64_t(st.st_mtim.tv_sec),
          int64_t(st.st_mtim.tv_nsec), int64_t(st.st_ctim.tv_sec), int64_t(st.st_ctim.tv_nsec)};
}

void KernelChoices::readFile() {
  // A file of a few thousand choices takes 15-20 ms to parse, and a first compile looks at it
  // again before each of its timed keys (every write is a rename, so a new inode and times).
  const std::vector<int64_t> stamp = fileStamp();
  if (!stamp.empty() && stamp == stamp_) return;
  std::ifstream in(path_);
  if (!in) return;  // written after the first choice
  const std::string fix = "; delete it (its choices are timed again), or point SPMD_KERNEL_CACHE at another directory";
  Json file;
  try {
    file = Json::parse(in);
  } catch (const std::exception& e) {
    throw Error("kernel choices file " + path_ + " is not JSON (" + e.what() + ")" + fix);
  }
  try {
    if (file.at("format").get<std::string>() != "spmd kernel choices 1")
      throw Error("its format is '" + file.at("format").get<std::string>() + "', not 'spmd kernel choices 1'");
    for (const Json& c : file.at("choices")) {
      Entry e{{c.at("device").get<std::string>(), c.at("library").get<std::string>(), c.at("op").get<std::string>(),
               c.at("shapes").get<std::string>()},
              c.at("variant").get<std::string>(), c.at("seconds").get<double>()};
      if (e.variant.empty()) throw Error("a choice names no variant");
      entries_.emplace(keyText(e.key), e);  // what this process chose or was sent stays
    }
  } catch (const std::exception& e) {
    throw Error("kernel choices file " + path_ + " is not one spmd wrote (" + e.what() + ")" + fix);
  }
  stamp_ = stamp;
}

namespace {

// An exclusive lock on `path`.lock while it lives (none where the file cannot be made: the
// choices are then this process's own).
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    if (path.empty()) return;
    std::error_code error;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
    fd_ = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) ::close(fd_), fd_ = -1;
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

void KernelChoices::pin(const std::string& text) {
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      throw Error("SPMD_KERNELS: '" + item + "' is not op:variant (e.g. conv2d:onednn); " +
                  "spmd-run --kernels lists the ops and their variants");
    const std::string op = item.substr(0, colon), variant = item.substr(colon + 1);
    if (auto [it, added] = pins_.emplace(op, variant); !added && it->second != variant)
      throw Error("SPMD_KERNELS pins " + op + " twice, to '" + it->second + "' and to '" + variant +
                  "'; give each op one variant");
  }
}

bool KernelChoices::pinned(const std::string& op) const {
  std::lock_guard lock(mutex_);
  return pins_.count(op) > 0;
}

std::string KernelChoices::pinOf(const std::string& op) const {
  std::lock_guard lock(mutex_);
  auto it = pins_.find(op);
  return it == pins_.end() ? "" : it->second;
}

std::string KernelChoices::pins() const {
  std::lock_guard lock(mutex_);
  std::string text;
  for (const auto& [op, variant] : pins_) text += (text.empty() ? "" : ",") + op + ":" + variant;
  return text;
}

void KernelChoices::setPins(const std::string& text) {
  KernelChoices parsed;
  parsed.pin(text);
  std::lock_guard lock(mutex_);
  pins_ = parsed.pins_;
}

Choice KernelChoices::choose(const ChoiceKey& key, const std::vector<Variant>& candidates, bool strictF32,
                             const std::function<std::vector<double>(const std::vector<Variant>&)>& time,
                             ChoiceExchange* exchange, const std::vector<std::string>& known) {
  std::lock_guard lock(mutex_);
  const std::string where = key.op + " (" + key.shapes + ") on " + key.device;
  std::vector<Variant> allowed;
  std::string refused;
  for (const Variant& v : candidates) {
    const std::string why = refusal(v, strictF32);
    if (why.empty())
      allowed.push_back(v);
    else
      refused += "; " + v.name + ": " + why;
  }
  std::string pinPassed;
  if (auto pinned = pins_.find(key.op); pinned != pins_.end()) {
    const bool elsewhere = std::find(known.begin(), known.end(), pinned->second) != known.end();
    if (const Variant* v = find(candidates, pinned->second)) {
      if (std::string why = refusal(*v, strictF32); !why.empty())
        throw Error("SPMD_KERNELS pins " + key.op + " to '" + v->name + "', which may not run: " + why +
                    "; the allowed variants of " + where + ": " + namesOf(allowed));
      return {v->name, Choice::From::Pinned, key.op + ": " + v->name + ", pinned by SPMD_KERNELS"};
    }
    if (!elsewhere)
      throw Error("SPMD_KERNELS pins " + key.op + " to '" + pinned->second + "', which is not a variant of " + where +
                  "; its variants: " + (known.empty() ? namesOf(candidates) : joined(known)));
    pinPassed = "; the pinned " + pinned->second + " does not run on this step";
  }
  if (allowed.empty())
    throw Error("no variant of " + where + " may run (" + std::to_string(candidates.size()) + " offered" + refused +
                ")");
  const std::string text = keyText(key);
  // What process 0 sends: the choice's key without the device, the device, the variant. Each key
  // is exchanged once per process (agreed_), the first time one of its replicas meets it: every
  // process meets its steps' keys in the same order, whatever its threads do.
  const std::string what = key.library + " | " + key.op + " | " + key.shapes;
  const bool agreed = agreed_.count(text) > 0;
  if (exchange && exchange->rank() != 0) {
    used_.insert(text);
    if (agreed) {
      const std::string& variant = entries_.at(text).variant;
      return {variant, Choice::From::ProcessZero, key.op + ": " + variant + ", process 0's choice"};
    }
    const std::string theirs = exchange->fromProcessZero("");
    const size_t a = theirs.find('\n'), b = a == std::string::npos ? a : theirs.find('\n', a + 1);
    if (b == std::string::npos) throw Error("process 0 sent no kernel choice for " + where);
    const std::string choiceOf = theirs.substr(0, a), device = theirs.substr(a + 1, b - a - 1),
                      variant = theirs.substr(b + 1);
    if (choiceOf != what)
      throw Error("process 0 sent its kernel choice for " + choiceOf + " while this process chose for " + what +
                  ": the processes run different programs");
    if (device != key.device)
      throw Error("process 0 chose the kernel of " + key.op + " (" + key.shapes + ") on " + device +
                  ", but this process runs " + key.device + ": a job's processes must run one device kind, or " +
                  "their replicas' bits differ; run the job on GPUs or CPUs of one kind");
    if (!find(allowed, variant))
      throw Error("process 0 chose variant '" + variant + "' of " + where + ", which this process does not offer " +
                  "(allowed here: " + namesOf(allowed) + "); run every process with the same library versions");
    entries_[text] = {key, variant, 0, true};
    agreed_.insert(text);
    return {variant, Choice::From::ProcessZero, key.op + ": " + variant + ", process 0's choice"};
  }
  used_.insert(text);
  Choice choice;
  // Not known here: another process sharing the file may have timed it meanwhile; look again
  // under the file's lock, held until this process's choice is written.
  std::optional<FileLock> fileLock;
  if (auto it = entries_.find(text); it == entries_.end() || !find(allowed, it->second.variant)) {
    fileLock.emplace(path_);
    if (!path_.empty()) readFile();
  }
  if (auto it = entries_.find(text); it != entries_.end() && it->second.processZero) {
    choice = {it->second.variant, Choice::From::ProcessZero, key.op + ": " + it->second.variant + ", process 0's choice"};
  } else if (auto it = entries_.find(text); it != entries_.end() && find(allowed, it->second.variant)) {
    choice = {it->second.variant, Choice::From::Remembered,
              key.op + ": " + it->second.variant + ", chosen before" + (path_.empty() ? "" : " (" + path_ + ")") +
                  pinPassed};
  } else {
    std::string elsewhere;
    for (const auto& [_, e] : entries_)
      if (e.key.library == key.library && e.key.op == key.op && e.key.shapes == key.shapes && e.key.device != key.device)
        elsewhere = "; the choice " + path_ + " holds was made on " + e.key.device + ", not on " + key.device +
                    ", so it is not used";
    // In a job of several processes the others wait for process 0's choices, busy in MPI: their
    // load says nothing, so only a process of its own looks at the machine's.
    const CpuTicks before = exchange ? CpuTicks{} : cpuTicksNow();
    const std::vector<double> seconds = time(allowed);
    const MachineLoad load = exchange ? MachineLoad{} : loadBetween(before, cpuTicksNow(), onlineCores());
    if (seconds.size() != allowed.size())
      throw Error("timing " + where + " gave " + std::to_string(seconds.size()) + " times for " +
                  std::to_string(allowed.size()) + " variants");
    int best = -1;
    for (size_t i = 0; i < allowed.size(); ++i)
      if (std::isfinite(seconds[i]) && seconds[i] >= 0 && (best < 0 || seconds[i] < seconds[size_t(best)])) best = int(i);
    if (best < 0)
      throw Error("none of the allowed variants of " + where + " ran (" + namesOf(allowed) + ")");
    entries_[text] = {key, allowed[size_t(best)].name, seconds[size_t(best)]};
    save();
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.3f", seconds[size_t(best)] * 1e3);
    choice = {allowed[size_t(best)].name, Choice::From::Timed,
              key.op + ": " + allowed[size_t(best)].name + ", the fastest of " + std::to_string(allowed.size()) +
                  " timed (" + ms + " ms)" + elsewhere + pinPassed + underLoad(load)};
  }
  if (exchange && !agreed) {
    exchange->fromProcessZero(what + "\n" + key.device + "\n" + choice.variant);
    agreed_.insert(text);
  }
  return choice;
}

void KernelChoices::save() const {
  if (path_.empty()) return;
  // One choice a line, each line made once: a first compile writes the whole file after each of
  // its timed keys, and dumping a few thousand choices again each time took 10 ms.
  std::string text = "{\"format\": \"spmd kernel choices 1\", \"choices\": [";
  const char* separator = "\n";
  for (const auto& [_, e] : entries_) {
    if (e.json.empty())
      e.json = Json{{"device", e.key.device}, {"library", e.key.library}, {"op", e.key.op},
                    {"shapes", e.key.shapes}, {"variant", e.variant}, {"seconds", e.seconds}}.dump();
    text += separator;
    text += e.json;
    separator = ",\n";
  }
  text += "\n]}\n";
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), error);  // a failure shows below
  try {
    writeFileAtomically(path_, {std::as_bytes(std::span(text.data(), text.size()))});
    stamp_ = fileStamp();  // under the file's lock: what this process wrote, with every entry it has
  } catch (const std::exception& e) {
    // The choice holds for this process; the next run times it again.
    static std::once_flag warned;
    std::call_once(warned, [&] {
      std::fprintf(stderr, "spmd: warning: kernel choices are not kept for later runs: %s; set SPMD_KERNEL_CACHE "
                   "to a writable directory\n", e.what());
    });
  }
}

std::string KernelChoices::underLoad(const MachineLoad& load) {
  if (!load.contended()) return "";
  char cores[64];
  std::snprintf(cores, sizeof cores, "%.1f of the %d cores", load.others, load.cores);
  if (!warnedLoad_) {
    warnedLoad_ = true;
    const std::string kept = path_.empty() ? "this run's choices"
                                           : "the choices kept in " + path_ + " for every later run on this machine";
    std::fprintf(stderr,
                 "spmd: warning: kernel variants were timed while other processes kept %s busy, so %s may be "
                 "slower than a quiet machine's; %s (SPMD_LOG_COMPILES=1 names each choice timed under load)\n",
                 cores, kept.c_str(),
                 path_.empty() ? "run again on a quiet machine"
                               : ("to time them again, delete " + path_ +
                                  " (or set SPMD_KERNEL_CACHE to another directory) and run on a quiet machine")
                                     .c_str());
  }
  return std::string("; timed while other processes kept ") + cores + " busy";
}

std::string KernelChoices::used() const {
  std::lock_guard lock(mutex_);
  Json list = Json::array();
  for (const std::string& text : used_) {
    const Entry& e = entries_.at(text);
    list.push_back({{"device", e.key.device}, {"library", e.key.library}, {"op", e.key.op}, {"shapes", e.key.shapes},
                    {"variant", e.variant}});
  }
  return list.dump();
}

namespace {

// used()'s JSON text as entries by key text; throws naming `what`.
std::map<std::string, std::pair<ChoiceKey, std::string>> parseUsed(const std::string& text, const std::string& what) {
  std::map<std::string, std::pair<ChoiceKey, std::string>> out;
  try {
    const Json list = Json::parse(text);
    if (!list.is_array()) throw Error("not a list");
    for (const Json& c : list) {
      ChoiceKey key{c.at("device").get<std::string>(), c.at("library").get<std::string>(), c.at("op").get<std::string>(),
                    c.at("shapes").get<std::string>()};
      out[keyText(key)] = {key, c.at("variant").get<std::string>()};
    }
  } catch (const std::exception& e) {
    throw Error(what + " does not hold kernel choices spmd wrote (" + e.what() + ")");
  }
  return out;
}

}  // namespace

int KernelChoices::adopt(const std::string& text, const std::string& what) {
  const auto choices = parseUsed(text, what);
  std::lock_guard lock(mutex_);
  for (const auto& [keyText, choice] : choices) entries_[keyText] = Entry{choice.first, choice.second};
  return int(choices.size());
}

std::string KernelChoices::differences(const std::string& before, const std::string& now, const std::string& what) {
  const auto was = parseUsed(before, what), is = parseUsed(now, "this run's kernel choices");
  std::string text;
  int count = 0;
  for (const auto& [keyText, choice] : is) {
    auto it = was.find(keyText);
    if (it != was.end() && it->second.second == choice.second) continue;
    if (++count > 3) continue;
    const ChoiceKey& k = choice.first;
    std::string why = it != was.end() ? "the checkpoint's run ran " + it->second.second : "the checkpoint's run did not choose it";
    if (it == was.end())
      for (const auto& [_, old] : was)
        if (old.first.op == k.op && old.first.shapes == k.shapes && old.first.device != k.device)
          why = "the checkpoint's run chose it on " + old.first.device + ", this one runs " + k.device;
    text += std::string(text.empty() ? "" : "; ") + k.op + " (" + k.shapes + ") ran " + choice.second + ", " + why;
  }
  if (count > 3) text += "; and " + std::to_string(count - 3) + " more";
  return text;
}

std::map<std::string, std::string> KernelChoices::remembered() const {
  std::lock_guard lock(mutex_);
  std::map<std::string, std::string> out;
  for (const auto& [text, e] : entries_) out[text] = e.variant;
  return out;
}

namespace {

class JobExchange final : public ChoiceExchange {
 public:
  explicit JobExchange(const Job& job) : job_(job) {}
  int rank() const override { return job_.info().rank; }
  std::string fromProcessZero(const std::string& text) override {
    std::vector<std::byte> size(sizeof(uint64_t));
    const uint64_t mine = text.size();
    std::memcpy(size.data(), &mine, sizeof mine);
    job_.broadcast(size, "the size of process 0's kernel choice");
    uint64_t bytes = 0;
    std::memcpy(&bytes, size.data(), sizeof bytes);
    std::vector<std::byte> data(bytes);
    if (rank() == 0) std::memcpy(data.data(), text.data(), bytes);
    if (bytes) job_.broadcast(data, "process 0's kernel choice");
    return std::string(reinterpret_cast<const char*>(data.data()), data.size());
  }

 private:
  const Job& job_;
};

}  // namespace

std::unique_ptr<ChoiceExchange> exchangeOf(const Job& job) {
  if (job.info().size <= 1) return nullptr;
  return std::make_unique<JobExchange>(job);
}

KernelChoices& KernelChoices::process() {
  static const std::unique_ptr<KernelChoices> choices = [] {
    auto c = std::make_unique<KernelChoices>((kernelCacheDir() / "kernel-choices.json").string());
    if (const char* pins = std::getenv("SPMD_KERNELS")) c->pin(pins);
    return c;
  }();
  return *choices;
}

}  // namespace spmd::runtime
