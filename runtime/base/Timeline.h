// The timeline: a Chrome trace event file (opens in Perfetto or chrome://tracing) of what every
// replica, communication thread and the host did, for SPMD_TRACE=<file.json>, PmapOptions::trace
// and the sample's --trace. One track per replica (every step of its Program: op, layer path,
// bytes written), one per communication thread or replica's collectives (each collective), one
// for the host (compiles, data waits). Off, it costs one relaxed atomic load per step; on, a
// clock read and an append under a mutex per event (measured in the sample's notes).
//
// Under mpirun each process writes its own file, "<stem>.<process>.json" (pid = the process
// index, so the files can be merged by concatenating their traceEvents arrays).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace spmd::runtime::timeline {

using Clock = std::chrono::steady_clock;

// Whether events are being recorded.
bool on();
// Starts recording into `path` (written by write() and at exit). The first path wins: a second
// start with another path throws spmd::Error naming both. SPMD_TRACE starts it at the first
// on() check that sees the variable.
void start(const std::string& path);
// This process's index and the job's size (runtime/mpi calls it when a job of several
// processes starts): the events' pid and the file's name.
void setProcess(int index, int count);
// A track's id, created (and named in the file) on first use.
int track(const std::string& name);
// The calling thread's host track ("host" for the first thread that asks, "host thread N" after):
// compiles and data waits.
int hostTrack();
// One finished span on `track`. `detail` is the layer path or the collective's description;
// `bytes` < 0 leaves bytes out.
void span(int track, const std::string& name, const char* category, Clock::time_point begin, Clock::time_point end,
          const std::string& detail = "", int64_t bytes = -1);
// Writes the file now (atomically) and returns its path; nothing when off. Events keep being
// recorded; a later write() rewrites the file with all of them.
std::string write();

}  // namespace spmd::runtime::timeline
