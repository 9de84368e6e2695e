#include "cli/progress.h"

#include <unistd.h>

#include <string>

namespace cli {

namespace {
std::string duration(double seconds) {
  char buf[32];
  const int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, s / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  return buf;
}
}  // namespace

Progress::Progress(std::FILE* out) : out_(out), tty_(isatty(fileno(out)) != 0) {}

void Progress::on_start(const train::Config& config, int64_t first_step, int64_t params) {
  total_ = config.train.steps;
  std::fprintf(out_, "training %s: %s task, %lld parameters, %d steps from step %lld, %d thread%s\n",
               config.name.c_str(), config.task.kind.c_str(), static_cast<long long>(params),
               config.train.steps, static_cast<long long>(first_step), config.train.threads,
               config.train.threads == 1 ? "" : "s");
  std::fflush(out_);
}

void Progress::on_step(const train::MetricsRecord& r, double eta_seconds) {
  if (r.eval_acc) last_acc_ = *r.eval_acc;
  if (!tty_) return;
  const auto now = std::chrono::steady_clock::now();
  // Redrawing every step would spend more time in the terminal than in training tiny models.
  if (r.step != total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const int width = 24;
  const int filled = static_cast<int>(width * r.step / std::max<int64_t>(1, total_));
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, '.');
  char acc[16] = "  -  ";
  if (last_acc_ >= 0) std::snprintf(acc, sizeof acc, "%5.1f%%", 100 * last_acc_);
  std::fprintf(out_, "\r[%s] %lld/%lld loss %.4f acc %s %.0f tok/s ETA %s \x1b[K", bar.c_str(),
               static_cast<long long>(r.step), static_cast<long long>(total_), r.loss, acc, r.tokens_per_s,
               duration(eta_seconds).c_str());
  std::fflush(out_);
  line_open_ = true;
}

void Progress::on_log(const train::MetricsRecord& r) {
  if (tty_) return;
  std::fprintf(out_, "step %lld/%lld loss %.4f lr %.2e grad_norm %.3f tok/s %.0f",
               static_cast<long long>(r.step), static_cast<long long>(total_), r.loss, r.lr, r.grad_norm,
               r.tokens_per_s);
  if (r.eval_acc) std::fprintf(out_, " eval_loss %.4f eval_acc %.4f", *r.eval_loss, *r.eval_acc);
  std::fputc('\n', out_);
  std::fflush(out_);
}

void Progress::on_message(const std::string& text) {
  finish_line();
  std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
}

void Progress::finish_line() {
  if (line_open_) std::fputc('\n', out_);
  line_open_ = false;
}

}  // namespace cli
