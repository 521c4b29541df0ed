// CSV rows, the gnuplot script, and the progress display.
#include "Report.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "runtime/base/AtomicFile.h"
#include "runtime/base/Error.h"

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
  spmd::writeFileAtomically(path, {std::as_bytes(std::span(text.data(), text.size()))});
}

bool plotMetrics(const std::string& dir, std::string& why) {
  // gnuplot runs inside `dir` on the fixed names metrics.csv / metrics.png, with the script on
  // its standard input: no path of the user's ever becomes script or shell text.
  static const char kScript[] =
      "set datafile separator ','\n"
      "set terminal pngcairo size 1200,450 font 'sans,11'\n"
      "set output 'metrics.png'\n"
      "set multiplot layout 1,2 title 'ResNet-18 on Fashion-MNIST (spmd)'\n"
      "set xlabel 'epoch'; set xtics 1; set grid; set key bottom right\n"
      "set ylabel 'test accuracy (%)'\n"
      "plot 'metrics.csv' using 1:($5*100) skip 1 with linespoints lw 2 pt 7 title 'test accuracy'\n"
      "set ylabel 'loss'; set key top right\n"
      "plot 'metrics.csv' using 1:2 skip 1 with linespoints lw 2 pt 7 title 'train loss', "
      "'metrics.csv' using 1:4 skip 1 with linespoints lw 2 pt 5 title 'test loss'\n"
      "unset multiplot\n";
  int input[2];
  if (pipe(input) != 0) {
    why = std::string("cannot make a pipe for gnuplot: ") + std::strerror(errno);
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, input[0], STDIN_FILENO);
  posix_spawn_file_actions_addclose(&actions, input[1]);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  char name[] = "gnuplot";
  char* argv[] = {name, nullptr};
  pid_t pid = 0;
  int spawned = posix_spawnp(&pid, "gnuplot", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(input[0]);
  if (spawned != 0) {
    close(input[1]);
    why = spawned == ENOENT ? "gnuplot not found (apt-get install gnuplot-nox); the metrics are in " +
                                  (std::filesystem::path(dir) / "metrics.csv").string()
                            : std::string("cannot start gnuplot: ") + std::strerror(spawned);
    return false;
  }
  signal(SIGPIPE, SIG_IGN);  // a gnuplot that dies early must not kill the training run
  bool written = write(input[1], kScript, sizeof kScript - 1) == ssize_t(sizeof kScript - 1);
  close(input[1]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!written || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    why = "gnuplot failed (exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
          "); the metrics are in " + (std::filesystem::path(dir) / "metrics.csv").string();
    return false;
  }
  return true;
}

Progress::Progress(int64_t epoch, int64_t epochs, int64_t batches, int64_t first, bool mayDrawBar)
    : epoch_(epoch), epochs_(epochs), batches_(batches), first_(first), lastLogged_(first),
      tty_(mayDrawBar && isatty(STDOUT_FILENO)), start_(std::chrono::steady_clock::now()), lastDraw_() {}

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
