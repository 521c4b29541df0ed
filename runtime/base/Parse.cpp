// Switch and number parsing for environment variables and flags (see Parse.h).
#include "runtime/base/Parse.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "runtime/base/Error.h"
#include "runtime/base/RealText.h"

namespace spmd::runtime {

bool parseSwitch(const std::string& text, const std::string& what) {
  std::string lower;
  for (char c : text) lower += char(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "1" || lower == "true" || lower == "on" || lower == "yes") return true;
  if (lower == "0" || lower == "false" || lower == "off" || lower == "no") return false;
  throw Error(what + "='" + text + "' is not a switch; use 1, true, on or yes to turn it on and 0, false, off "
              "or no to turn it off");
}

int64_t parseWhole(const std::string& text, const std::string& what, int64_t min, int64_t max) {
  const std::string range = "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  bool digits = start < text.size() && (std::isdigit(static_cast<unsigned char>(text[start])) ||
                                        ((text[start] == '-' || text[start] == '+') && start + 1 < text.size() &&
                                         std::isdigit(static_cast<unsigned char>(text[start + 1]))));
  char* end = nullptr;
  errno = 0;
  long long v = digits ? std::strtoll(text.c_str() + start, &end, 10) : 0;
  if (!digits || *end != '\0')
    throw Error(what + " needs " + range + ", got '" + text + "'");
  if (errno == ERANGE || v < min || v > max)
    throw Error(what + " is " + text + ", out of range: give " + range);
  return v;
}

double parseNumber(const std::string& text, const std::string& what, double min, double max) {
  const std::string range = "a number from " + formatReal(min) + " to " + formatReal(max);
  char* end = nullptr;
  double v = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(text[0])) || std::isnan(v))
    throw Error(what + " needs " + range + ", got '" + text + "'");
  if (!std::isfinite(v) || v < min || v > max) throw Error(what + " is " + text + ", out of range: give " + range);
  return v;
}

namespace {
const char* valueOf(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}
}  // namespace

std::optional<bool> envSwitch(const char* name) {
  const char* value = valueOf(name);
  if (!value) return std::nullopt;
  return parseSwitch(value, name);
}

bool EnvSwitch::get() {
  const int forced = forced_.load();
  if (forced >= 0) return forced > 0;
  int read = read_.load();
  if (read < 0) read_ = read = envSwitch(name_).value_or(fallback_) ? 1 : 0;  // the same value on every thread
  return read > 0;
}

std::optional<int64_t> envWhole(const char* name, int64_t min, int64_t max) {
  const char* value = valueOf(name);
  if (!value) return std::nullopt;
  return parseWhole(value, name, min, max);
}

std::optional<double> envNumber(const char* name, double min, double max) {
  const char* value = valueOf(name);
  if (!value) return std::nullopt;
  return parseNumber(value, name, min, max);
}

}  // namespace spmd::runtime
