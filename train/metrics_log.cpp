#include "train/metrics_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "io/atomic_file.h"
#include "io/json_error.h"

namespace train {

nlohmann::json metrics_to_json(const MetricsRecord& r) {
  nlohmann::json j{{"step", r.step},
                   {"loss", r.loss},
                   {"lr", r.lr},
                   {"grad_norm", r.grad_norm},
                   {"tokens_per_s", r.tokens_per_s}};
  if (r.eval_loss) j["eval_loss"] = *r.eval_loss;
  if (r.eval_acc) j["eval_acc"] = *r.eval_acc;
  return j;
}

MetricsRecord metrics_record_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) io::json_error(source, "/", std::string("expected an object, got ") + j.type_name());
  MetricsRecord r;
  auto num = [&](const char* key, bool required) -> std::optional<double> {
    auto it = j.find(key);
    if (it == j.end() || (!required && it->is_null())) {
      if (required) io::json_error(source, "/", std::string("missing required key \"") + key + "\"");
      return std::nullopt;
    }
    if (!it->is_number())
      io::json_error(source, std::string("/") + key,
                     std::string("expected a number, got ") + it->type_name());
    return it->get<double>();
  };
  r.step = io::json_nonnegative_integer(io::json_member(j, "step", source, "/"), source, "/step");
  r.loss = *num("loss", true);
  r.lr = *num("lr", true);
  r.grad_norm = *num("grad_norm", true);
  r.tokens_per_s = *num("tokens_per_s", true);
  r.eval_loss = num("eval_loss", false);
  r.eval_acc = num("eval_acc", false);
  return r;
}

std::vector<MetricsRecord> read_metrics_jsonl(const std::string& path) {
  const std::string text = io::read_text_file(path);
  std::istringstream in(text);
  std::vector<MetricsRecord> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string source = path + ":" + std::to_string(n);
    const bool torn_tail = in.eof() && !text.empty() && text.back() != '\n';
    if (torn_tail && !nlohmann::json::accept(line)) break;
    out.push_back(metrics_record_from_json(io::parse_json(line, source), source));
  }
  return out;
}

MetricsAppender::MetricsAppender(const std::string& path) : path_(path) {
  // O_NOFOLLOW, and a regular file only: a link or FIFO planted in the run folder is never written through.
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd_ < 0 && errno == ELOOP) throw std::runtime_error(path + ": is a symbolic link, not a regular file");
  if (fd_ < 0) throw io::WriteError(path + ": cannot open for writing: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error(path + ": is " + io::file_kind(st.st_mode) + ", not a regular file");
  }
  ::fcntl(fd_, F_SETFL, O_APPEND);
}

MetricsAppender::~MetricsAppender() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsAppender::append(const MetricsRecord& r) {
  const std::string line = metrics_to_json(r).dump() + "\n";
  io::write_all(fd_, line.data(), line.size(), path_);
}

void truncate_metrics_jsonl(const std::string& path, int64_t step) {
  if (!std::filesystem::exists(path)) return;
  std::string kept;
  for (const MetricsRecord& r : read_metrics_jsonl(path))
    if (r.step <= step) kept += metrics_to_json(r).dump() + "\n";
  io::write_text_file_atomically(path, kept);
}

}  // namespace train
