// CSV rows, the gnuplot script, and the progress display.
#include "Report.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "runtime/Error.h"

namespace sample {

std::string csvHeader() {
  return "epoch,train_loss,train_accuracy,test_loss,test_accuracy,seconds,images_per_second,"
         "data_wait_seconds\n";
}

std::string csvRow(const EpochMetrics& m) {
  char line[256];
  std::snprintf(line, sizeof line, "%lld,%.6f,%.6f,%.6f,%.6f,%.3f,%.1f,%.3f\n",
                static_cast<long long>(m.epoch), m.trainLoss, m.trainAccuracy, m.testLoss,
                m.testAccuracy, m.seconds, m.imagesPerSecond, m.dataWaitSeconds);
  return line;
}

void writeFileAtomically(const std::string& path, const std::string& text) {
  std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text;
    if (!out.flush()) throw spmd::Error(temp + ": cannot write");
  }
  std::filesystem::rename(temp, path);
}

bool plotMetrics(const std::string& csv, const std::string& png, std::string& why) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    why = "gnuplot not found (apt-get install gnuplot-nox); the metrics are in " + csv;
    return false;
  }
  FILE* gp = popen("gnuplot > /dev/null 2>&1", "w");
  if (!gp) {
    why = "cannot start gnuplot";
    return false;
  }
  std::fprintf(gp,
               "set datafile separator ','\n"
               "set terminal pngcairo size 1200,450 font 'sans,11'\n"
               "set output '%s'\n"
               "set multiplot layout 1,2 title 'ResNet-18 on Fashion-MNIST (spmd)'\n"
               "set xlabel 'epoch'; set xtics 1; set grid; set key bottom right\n"
               "set ylabel 'test accuracy (%%)'\n"
               "plot '%s' using 1:($5*100) skip 1 with linespoints lw 2 pt 7 title 'test accuracy'\n"
               "set ylabel 'loss'; set key top right\n"
               "plot '%s' using 1:2 skip 1 with linespoints lw 2 pt 7 title 'train loss', "
               "'%s' using 1:4 skip 1 with linespoints lw 2 pt 5 title 'test loss'\n"
               "unset multiplot\n",
               png.c_str(), csv.c_str(), csv.c_str(), csv.c_str());
  if (pclose(gp) != 0) {
    why = "gnuplot failed";
    return false;
  }
  return true;
}

Progress::Progress(int64_t epoch, int64_t epochs, int64_t batches, int64_t first)
    : epoch_(epoch), epochs_(epochs), batches_(batches), first_(first), lastLogged_(first),
      tty_(isatty(STDOUT_FILENO)), start_(std::chrono::steady_clock::now()), lastDraw_() {}

void Progress::update(int64_t done, double loss, double accuracy, double imagesPerSecond) {
  auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (done < batches_ && now - lastDraw_ < std::chrono::milliseconds(100)) return;
    lastDraw_ = now;
    const int width = 30;
    int filled = static_cast<int>(width * done / std::max<int64_t>(1, batches_));
    std::string bar(filled, '#');
    bar.append(width - filled, '.');
    double elapsed = std::chrono::duration<double>(now - start_).count();
    double eta = done > first_ ? elapsed / double(done - first_) * double(batches_ - done) : 0;
    std::printf("\repoch %lld/%lld [%s] %lld/%lld  loss %.4f  acc %5.1f%%  %6.0f img/s  ETA %3.0f s ",
                static_cast<long long>(epoch_), static_cast<long long>(epochs_), bar.c_str(),
                static_cast<long long>(done), static_cast<long long>(batches_), loss,
                100 * accuracy, imagesPerSecond, eta);
    std::fflush(stdout);
    return;
  }
  // Plain lines, about ten per epoch.
  int64_t every = std::max<int64_t>(1, batches_ / 10);
  if (done - lastLogged_ < every && done < batches_) return;
  lastLogged_ = done;
  std::printf("epoch %lld/%lld step %lld/%lld: loss %.4f acc %.1f%% %.0f img/s\n",
              static_cast<long long>(epoch_), static_cast<long long>(epochs_),
              static_cast<long long>(done), static_cast<long long>(batches_), loss, 100 * accuracy,
              imagesPerSecond);
  std::fflush(stdout);
}

void Progress::finish() {
  if (tty_) std::printf("\n");
}

}  // namespace sample
