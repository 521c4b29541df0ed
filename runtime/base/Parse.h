// The one parser of the switches and numbers users give: environment variables and command-line
// flags. `what` names where the text came from ("SPMD_OVERLAP", "--steps"); errors say what was
// given and what is accepted (the switch words, the range), so no value is silently misread.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

namespace spmd::runtime {

// 1/0, true/false, on/off, yes/no, in any case; anything else throws.
bool parseSwitch(const std::string& text, const std::string& what);
// A whole number in [min, max] (decimal, optional sign; overflow is out of range).
int64_t parseWhole(const std::string& text, const std::string& what, int64_t min, int64_t max);
// A finite number in [min, max].
double parseNumber(const std::string& text, const std::string& what, double min, double max);

// The environment variable `name` parsed as above; nullopt when it is unset or empty.
std::optional<bool> envSwitch(const char* name);
std::optional<int64_t> envWhole(const char* name, int64_t min, int64_t max);
std::optional<double> envNumber(const char* name, double min, double max);

// A switch read from the environment variable `name` once (on first use; `fallback` when unset),
// which tests may override for what reads it afterwards (nullopt: the variable's value again).
class EnvSwitch {
 public:
  EnvSwitch(const char* name, bool fallback) : name_(name), fallback_(fallback) {}
  bool get();
  void set(std::optional<bool> on) { forced_ = on ? int(*on) : -1; }

 private:
  const char* name_;
  bool fallback_;
  std::atomic<int> read_{-1}, forced_{-1};  // -1: not read yet / the variable decides
};

}  // namespace spmd::runtime
