// runVariant and chooseVariant: one step's variant from pins, remembered choices, timing or the
// list's order (runtime/device/Variants.h).
#include "runtime/device/Variants.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>

#include "runtime/base/Error.h"
#include "runtime/base/MachineLoad.h"
#include "runtime/base/Parse.h"
#include "runtime/device/KernelChoice.h"
#include "runtime/device/WidenedBf16.h"

namespace spmd::runtime {
namespace {

// A variant that runs on a step: as it is, or between bf16 roundings (VariantSet::widensBf16).
struct Candidate {
  const KernelVariant* variant = nullptr;
  bool widened = false;
};

// What a step keeps: its variant and that variant's own cache slot.
struct VariantState {
  Candidate chosen;
  std::shared_ptr<void> cache;
  std::string why;
  // Timed on this call's own buffers, the variant ran last: its outputs are the call's (once).
  bool outputsWritten = false;
};

bool runsOn(const KernelVariant& v, const KernelCall& call) { return !v.runs || v.runs(call); }

// The step's f32 form: each bf16 view as f32, the same shape and layout (runs() reads no data).
std::vector<TensorView> widenedViews(std::span<const TensorView> views) {
  std::vector<TensorView> wide(views.begin(), views.end());
  for (TensorView& v : wide)
    if (v.dtype == DType::bf16) v.dtype = DType::f32;
  return wide;
}

// How `v` runs on `call`, if it does: as it is, else between bf16 roundings where the set widens.
std::optional<Candidate> candidateOn(const KernelVariant& v, const VariantSet& set, const KernelCall& call) {
  if (runsOn(v, call)) return Candidate{&v, false};
  if (!set.widensBf16 || !set.widensBf16(call)) return std::nullopt;
  const std::vector<TensorView> in = widenedViews(call.in), out = widenedViews(call.out);
  std::shared_ptr<void> none;
  const KernelCall wide{call.step, in, out, none, call.comm, call.device};
  if (runsOn(v, wide)) return Candidate{&v, true};
  return std::nullopt;
}

void runCandidate(const Candidate& c, const VariantSet& set, KernelCall& call) {
  if (!c.widened) c.variant->fn(call);
  else if (set.runWidened) set.runWidened(call, c.variant->fn);
  else widenedBf16(call, c.variant->fn);
}

// Why SPMD_THREAD_INVARIANT (`invariant`) or SPMD_TIGHT_ROUNDING (`tight`) leaves `v` out of the
// candidates, said to a pin of it; null where they do not.
const char* leftOut(const KernelVariant& v, bool invariant, bool tight) {
  if (invariant && !v.threadInvariant)
    return "whose bits depend on the thread count, while SPMD_THREAD_INVARIANT=1 runs only variants whose bits do "
           "not: pin one of those";
  if (tight && v.looseRounding)
    return "whose f32 rounding error is several times the direct kernels', while SPMD_TIGHT_ROUNDING=1 leaves such "
           "variants out: pin another";
  return nullptr;
}

// Shapes, layouts, dtypes and the integer attributes of the step: what its kernels' speed and
// bits depend on, with the backend's setting (threads).
std::string shapesOf(const KernelCall& call, const VariantSet& set) {
  std::ostringstream text;
  auto views = [&](const char* what, std::span<const TensorView> vs) {
    text << what;
    for (const TensorView& v : vs) {
      text << " " << dtypeName(v.dtype) << "[";
      for (size_t i = 0; i < v.rank(); ++i) text << (i ? "," : "") << v.dim(i);
      text << "]" << v.layout;
    }
  };
  views("in", call.in);
  views(" out", call.out);
  for (const auto& [name, value] : call.step.attrs) {
    if (const auto* i = std::get_if<int64_t>(&value)) text << " " << name << " " << *i;
    if (const auto* list = std::get_if<std::vector<int64_t>>(&value)) {
      text << " " << name;
      for (int64_t v : *list) text << " " << v;
    }
  }
  if (set.setting) text << ", " << set.setting();
  return text.str();
}

std::vector<std::string> namesOf(const VariantSet& set) {
  std::vector<std::string> names;
  for (const KernelVariant& v : set.variants) names.push_back(v.name);
  return names;
}

// Seconds for each variant in `allowed` on `call`'s buffers, their prepared states left in
// `states` (the winner's is kept). Each runs once to warm up (primitives, scratch); then rounds
// time each remaining variant once, in turn, so that a burst of load on a shared machine falls
// on all of them, and the least time of each is kept. After a round a variant over 1.5x the
// best is dropped (its time stands); another round runs only while two are left within that,
// at most 3 rounds in all and none after 50 ms of them. A round runs the fastest so far last
// (the first round: by the warm-up's times), so that the winner has usually written the call's
// outputs when timing ends and the step need not run it again; `last` names the one that did.
// A run whose thread waited for a core meanwhile (another process took it: waitedForCores) does
// not count where the variant has an undisturbed one, and drops nothing: a variant whose every
// run so far waited runs again after those rounds, alone, until one does not (at most
// kMostRounds rounds in all and none after kMostSeconds of them), so that one burst of load on
// one variant's run does not decide a choice that is kept for every later run.
constexpr int kMostRounds = 6;
constexpr double kMostSeconds = 0.25;

std::vector<double> timeVariants(const KernelCall& call, const VariantSet& set, const std::vector<Candidate>& running,
                                 const std::vector<Variant>& allowed, std::map<std::string, std::shared_ptr<void>>& states,
                                 std::string& last) {
  using Clock = std::chrono::steady_clock;
  std::vector<KernelCall> trials;
  for (const Variant& v : allowed)
    trials.push_back(KernelCall{call.step, call.in, call.out, states[v.name], call.comm, call.device, nullptr, nullptr});
  std::vector<Candidate> runs;
  for (const Variant& v : allowed)
    for (const Candidate& c : running)
      if (v.name == c.variant->name) runs.push_back(c);
  const size_t n = allowed.size();
  std::vector<double> quiet(n, INFINITY), any(n, INFINITY), warm(n);  // least times: undisturbed runs, all runs
  auto once = [&](size_t i) {
    const double before = runQueueSeconds();
    const auto start = Clock::now();
    runCandidate(runs[i], set, trials[i]);
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    const double waited = runQueueSeconds() - before;  // NaN where unknown: undisturbed
    any[i] = std::min(any[i], t);
    if (!waitedForCores(waited, t)) quiet[i] = std::min(quiet[i], t);
    return t;
  };
  auto seconds = [&](size_t i) { return std::isfinite(quiet[i]) ? quiet[i] : any[i]; };
  for (size_t i = 0; i < n; ++i) warm[i] = once(i);
  std::fill(quiet.begin(), quiet.end(), INFINITY), std::fill(any.begin(), any.end(), INFINITY);
  std::vector<bool> timing(n, true);
  std::vector<size_t> order(n);
  double spent = 0;
  bool settled = false;  // the rounds above are done: only variants without an undisturbed run go on
  for (int round = 0; round < kMostRounds; ++round) {
    auto sofar = [&](size_t i) { return round == 0 ? warm[i] : seconds(i); };
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sofar(a) > sofar(b); });
    for (size_t i : order)
      if (timing[i] && (!settled || !std::isfinite(quiet[i]))) spent += once(i), last = allowed[i].name;
    double best = INFINITY;
    for (size_t i = 0; i < n; ++i) best = std::min(best, seconds(i));
    int close = 0;
    bool disturbed = false;  // a variant still in the running has no undisturbed run
    for (size_t i = 0; i < n; ++i) {
      timing[i] = timing[i] && (!std::isfinite(quiet[i]) || quiet[i] <= 1.5 * best);
      close += timing[i];
      disturbed = disturbed || (timing[i] && !std::isfinite(quiet[i]));
    }
    settled = settled || close < 2 || spent >= 0.05 || round >= 2;
    if (settled && (!disturbed || spent >= kMostSeconds)) break;
  }
  std::vector<double> result(n);
  for (size_t i = 0; i < n; ++i) result[i] = seconds(i);
  return result;
}

VariantState choose(const KernelCall& call, const VariantSet& set, ChoiceExchange* exchange) {
  const bool invariant = threadInvariantKernels(), tight = tightRoundingKernels();
  std::vector<Candidate> running;
  for (const KernelVariant& v : set.variants)
    if (const std::optional<Candidate> c = candidateOn(v, set, call); c && !leftOut(v, invariant, tight))
      running.push_back(*c);
  if (running.empty())
    throw Error("no " + std::string(set.backend) + " kernel of '" + set.op + "'" +
                (invariant ? " whose bits do not depend on the thread count" : "") +
                (tight ? " with tight rounding" : "") + " runs on step '" +
                call.step.op + "' (" + call.step.where() + ") with these operands; this is a bug in spmd's kernel list");
  KernelChoices& choices = KernelChoices::process();
  // A pin names a variant of the op, whether or not that one runs on this step.
  const std::string pin = choices.pinOf(set.op);
  if (const std::vector<std::string> names = namesOf(set);
      !pin.empty() && std::find(names.begin(), names.end(), pin) == names.end())
    choices.choose({set.device(), set.library(), set.op, shapesOf(call, set)}, {{running[0].variant->name, true, false}}, false,
                   nullptr, nullptr, names);  // throws, listing the variants
  for (const KernelVariant& v : set.variants)
    if (pin == v.name)
      if (const char* why = leftOut(v, invariant, tight))
        throw Error("SPMD_KERNELS pins " + std::string(set.op) + " to '" + pin + "', " + why + " (`spmd-run --kernels " +
                    set.backend + "` marks them) or unset one of the two");
  // Said of a variant run between bf16 roundings.
  auto how = [](const Candidate& c, std::string why) {
    return c.widened ? why + " (in f32 between bf16 roundings)" : why;
  };
  if (running.size() == 1) return {running[0], nullptr, how(running[0], "the only variant that runs here")};
  if (!kernelTiming()) {  // untimed: a pin where it runs, else the list's order, bf16 kernels before widened ones
    for (const Candidate& c : running)
      if (pin == c.variant->name) return {c, nullptr, how(c, "pinned by SPMD_KERNELS")};
    std::vector<Candidate> ordered = running;
    const auto widened = std::stable_partition(ordered.begin(), ordered.end(), [](const Candidate& c) { return !c.widened; });
    for (const Candidate& c : ordered)
      if (!c.variant->pays || c.variant->pays(call))
        return {c, nullptr, how(c, "the first that pays in the list's order (SPMD_KERNEL_TIMING=0)")};
    const Candidate& last = widened != ordered.begin() ? *(widened - 1) : ordered.back();
    return {last, nullptr, how(last, "the last in the list's order (SPMD_KERNEL_TIMING=0)")};
  }
  std::vector<Variant> candidates;
  for (const Candidate& c : running) candidates.push_back({c.variant->name, true, false});
  std::map<std::string, std::shared_ptr<void>> states;
  std::string last;  // the variant timing ran last on the call's buffers ("": none timed here)
  // The candidates belong to the key: a choice made before a variant existed is made again.
  std::string among = ", among";
  for (const Candidate& c : running) among += std::string(" ") + c.variant->name + (c.widened ? "(widened)" : "");
  const ChoiceKey key{set.device(), set.library(), set.op, shapesOf(call, set) + among};
  const Choice choice = choices.choose(
      key, candidates, false,
      [&](const std::vector<Variant>& allowed) { return timeVariants(call, set, running, allowed, states, last); }, exchange,
      namesOf(set));
  // Choice::why starts "op: variant, ": said once already by whoever prints it.
  const std::string said = std::string(set.op) + ": " + choice.variant + ", ";
  const std::string why = choice.why.rfind(said, 0) == 0 ? choice.why.substr(said.size()) : choice.why;
  for (const Candidate& c : running)
    if (choice.variant == c.variant->name) return {c, states[c.variant->name], how(c, why), last == c.variant->name};
  throw Error("the kernel choice for '" + std::string(set.op) + "' named '" + choice.variant + "', which does not run here");
}

}  // namespace

bool kernelTiming() {
  static const bool on = envSwitch("SPMD_KERNEL_TIMING").value_or(true);
  return on;
}

bool cudnnSearch() {
  static const bool on = envSwitch("SPMD_CUDNN_SEARCH").value_or(true);
  return on;
}

bool cudnnGraphEngines() { return envSwitch("SPMD_CUDNN_GRAPH").value_or(false); }

bool cudaChannelsLast() { return envSwitch("SPMD_CHANNELS_LAST").value_or(false); }

namespace {
EnvSwitch threadInvariant("SPMD_THREAD_INVARIANT", false);
EnvSwitch tightRounding("SPMD_TIGHT_ROUNDING", false);
}  // namespace

bool threadInvariantKernels() { return threadInvariant.get(); }

void setThreadInvariantKernels(std::optional<bool> on) { threadInvariant.set(on); }

bool tightRoundingKernels() { return tightRounding.get(); }

void setTightRoundingKernels(std::optional<bool> on) { tightRounding.set(on); }

void runVariant(KernelCall& call, const VariantSet& set) {
  if (!call.cache) {
    auto state = std::make_shared<VariantState>(choose(call, set, nullptr));
    if (envSwitch("SPMD_LOG_COMPILES").value_or(false))
      std::fprintf(stderr, "spmd: %s kernel of '%s' (%s): %s, %s\n", set.backend, call.step.op.c_str(),
                   call.step.where().c_str(), state->chosen.variant->name, state->why.c_str());
    call.cache = std::move(state);
  }
  auto& state = *static_cast<VariantState*>(call.cache.get());
  if (call.variant && call.variant->empty()) *call.variant = std::string(state.chosen.variant->name) + ": " + state.why;
  if (state.outputsWritten) {  // the first call's outputs are the winner's timed run (timeVariants)
    state.outputsWritten = false;
    return;
  }
  KernelCall inner{call.step,  call.in,    call.out, state.cache,   call.comm,
                   call.device, call.later, call.check, call.variant, call.shared, call.stepIndex};
  runCandidate(state.chosen, set, inner);
}

void chooseVariant(KernelCall& call, const VariantSet& set, ChoiceExchange* exchange) {
  choose(call, set, exchange);
}

}  // namespace spmd::runtime
