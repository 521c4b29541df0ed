// The Chrome trace recorder (see Timeline.h). Events are kept in memory and written as the
// "JSON object format": {"traceEvents": [...]}, complete events ("ph": "X", microseconds since
// the recorder started) and one thread_name metadata event per track.
#include "runtime/base/Timeline.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <span>
#include <vector>

#include "runtime/base/AtomicFile.h"
#include "runtime/base/Error.h"

namespace spmd::runtime::timeline {
namespace {

struct Event {
  int track;
  std::string name, detail;
  const char* category;
  int64_t beginNs, durationNs, bytes;
};

struct Recorder {
  std::mutex mutex;
  std::atomic<bool> recording{false};
  std::string path;
  int process = 0, processes = 1;
  Clock::time_point origin = Clock::now();
  std::vector<std::string> tracks;
  std::vector<Event> events;
};

Recorder& recorder() {
  static Recorder* r = new Recorder;  // never destroyed: replica threads may record during exit
  return *r;
}

std::once_flag environmentChecked;

void fromEnvironment() {
  std::call_once(environmentChecked, [] {
    const char* path = std::getenv("SPMD_TRACE");
    if (path && *path) start(path);
  });
}

void appendEscaped(std::string& out, const std::string& text) {
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\u%04x", c);
      out += hex;
    } else {
      out += char(c);
    }
  }
}

std::string fileName(const Recorder& r) {
  if (r.processes <= 1) return r.path;
  std::string stem = r.path, extension;
  size_t slash = stem.find_last_of('/'), dot = stem.find_last_of('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) {
    extension = stem.substr(dot);
    stem.resize(dot);
  }
  return stem + "." + std::to_string(r.process) + (extension.empty() ? ".json" : extension);
}

}  // namespace

bool on() {
  fromEnvironment();
  return recorder().recording.load(std::memory_order_relaxed);
}

void start(const std::string& path) {
  if (path.empty()) throw Error("the trace file's path is empty: give a path such as trace.json");
  // Checked now, not when the file is written at exit after the whole run.
  namespace fs = std::filesystem;
  const fs::path file(path);
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  std::error_code error;
  const std::string cannot = "the trace file " + path + " (SPMD_TRACE, PmapOptions::trace, --trace) cannot be written: ";
  if (!fs::is_directory(dir, error))
    throw Error(cannot + "its directory " + dir.string() + " does not exist; create it or give another path");
  if (::access(dir.c_str(), W_OK) != 0)
    throw Error(cannot + "its directory " + dir.string() + " is not writable (" + std::strerror(errno) +
                "); give a path in a writable directory");
  if (fs::is_directory(file, error)) throw Error(cannot + "it is a directory; give a file name such as trace.json");
  if (fs::exists(file, error) && ::access(path.c_str(), W_OK) != 0)
    throw Error(cannot + "the file exists and is not writable (" + std::strerror(errno) + ")");
  Recorder& r = recorder();
  {
    std::lock_guard lock(r.mutex);
    if (r.recording && r.path != path)
      throw Error("a timeline is already being written to " + r.path + "; one process writes one trace (asked for " +
                  path + " too)");
    if (r.recording) return;
    r.path = path;
    r.recording = true;
  }
  std::atexit([] {
    try {
      write();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "spmd: the timeline was not written: %s\n", e.what());
    }
  });
}

void setProcess(int index, int count) {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.process = index;
  r.processes = count;
}

int track(const std::string& name) {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  for (size_t i = 0; i < r.tracks.size(); ++i)
    if (r.tracks[i] == name) return int(i) + 1;
  r.tracks.push_back(name);
  return int(r.tracks.size());
}

int hostTrack() {
  static std::atomic<int> threads{0};
  thread_local int mine = 0;
  if (!mine) {
    int n = ++threads;
    mine = track(n == 1 ? std::string("host") : "host thread " + std::to_string(n));
  }
  return mine;
}

void span(int track, const std::string& name, const char* category, Clock::time_point begin, Clock::time_point end,
          const std::string& detail, int64_t bytes) {
  Recorder& r = recorder();
  if (!r.recording.load(std::memory_order_relaxed)) return;
  auto ns = [&](Clock::time_point t) { return std::chrono::duration_cast<std::chrono::nanoseconds>(t - r.origin).count(); };
  std::lock_guard lock(r.mutex);
  r.events.push_back({track, name, detail, category, ns(begin), ns(end) - ns(begin), bytes});
}

std::string write() {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  if (!r.recording) return "";
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  const std::string pid = std::to_string(r.process);
  out += "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + pid + ", \"tid\": 0, \"args\": {\"name\": \"process " +
         pid + "\"}}";
  for (size_t i = 0; i < r.tracks.size(); ++i) {
    out += ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + pid + ", \"tid\": " + std::to_string(i + 1) +
           ", \"args\": {\"name\": \"";
    appendEscaped(out, r.tracks[i]);
    out += "\"}}";
    out += ",\n{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": " + pid + ", \"tid\": " +
           std::to_string(i + 1) + ", \"args\": {\"sort_index\": " + std::to_string(i + 1) + "}}";
  }
  char number[64];
  for (const Event& e : r.events) {
    out += ",\n{\"ph\": \"X\", \"pid\": " + pid + ", \"tid\": " + std::to_string(e.track) + ", \"name\": \"";
    appendEscaped(out, e.name);
    out += "\", \"cat\": \"" + std::string(e.category) + "\"";
    std::snprintf(number, sizeof number, ", \"ts\": %.3f, \"dur\": %.3f", double(e.beginNs) / 1e3,
                  double(e.durationNs) / 1e3);
    out += number;
    if (!e.detail.empty() || e.bytes >= 0) {
      out += ", \"args\": {";
      if (!e.detail.empty()) {
        out += "\"detail\": \"";
        appendEscaped(out, e.detail);
        out += "\"";
      }
      if (e.bytes >= 0) out += std::string(e.detail.empty() ? "" : ", ") + "\"bytes\": " + std::to_string(e.bytes);
      out += "}";
    }
    out += "}";
  }
  out += "\n]}\n";
  const std::string path = fileName(r);
  writeFileAtomically(path, {std::as_bytes(std::span(out.data(), out.size()))});
  return path;
}

}  // namespace spmd::runtime::timeline
