// What the sample shows and writes: a progress bar on a terminal (plain log lines otherwise),
// per-epoch metrics as CSV, and a PNG plot of them drawn with gnuplot.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace sample {

struct EpochMetrics {
  int64_t epoch = 0;  // 1-based
  double trainLoss = 0, trainAccuracy = 0, testLoss = 0, testAccuracy = 0;
  double seconds = 0, imagesPerSecond = 0, dataWaitSeconds = 0;
};

std::string csvHeader();
std::string csvRow(const EpochMetrics& m);
// Writes `text` to `path` through a temporary file and a rename (never a half-written file).
void writeFileAtomically(const std::string& path, const std::string& text);
// Draws test accuracy and train/test loss per epoch from `dir`/metrics.csv into `dir`/metrics.png
// with gnuplot (run in `dir`, script on its stdin); returns false and says why (gnuplot missing
// or failing) without throwing.
bool plotMetrics(const std::string& dir, std::string& why);

// A bar redrawn in place when `mayDrawBar` and stdout is a terminal; else about ten plain lines
// per epoch. Under mpirun a process's stdout can be a pseudo-terminal that Open MPI forwards
// into the user's log, so a job of several processes passes false and always gets lines.
class Progress {
 public:
  Progress(int64_t epoch, int64_t epochs, int64_t batches, int64_t first, bool mayDrawBar);
  // After each step: batches done in this epoch, running train loss and accuracy, images/s.
  void update(int64_t done, double loss, double accuracy, double imagesPerSecond);
  void finish();

 private:
  int64_t epoch_, epochs_, batches_, first_, lastLogged_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, lastDraw_;
};

}  // namespace sample
