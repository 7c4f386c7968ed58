// Terminal and JSON output of a training run.
#include "runtime/train/training_report.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "runtime/process/process_stats.hpp"

namespace degnn {

namespace {

std::string split_json(const epoch_record& r) {
  std::string out = "{";
  char buf[64];
  for (size_t i = 0; i < r.split.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s\"%s\":%.4f", i ? "," : "", r.split[i].first.c_str(),
                  r.split[i].second);
    out += buf;
  }
  return out + "}";
}

bool sync_path_of(std::FILE* f) {
  return ::fsync(::fileno(f)) == 0 || errno == EINVAL || errno == EROFS;
}

}  // namespace

training_report::training_report(std::string run_name, const std::string& metrics_file,
                                 bool progress)
    : run_(std::move(run_name)),
      metrics_file_(metrics_file),
      live_(progress && ::isatty(STDERR_FILENO)) {
  if (!metrics_file.empty()) {
    metrics_ = std::fopen(metrics_file.c_str(), "a");
    if (!metrics_)
      throw std::runtime_error(metrics_file +
                               ": cannot open metrics file: " + std::strerror(errno));
  }
}

training_report::~training_report() {
  if (metrics_) std::fclose(metrics_);
}

void training_report::batch_progress(int epoch, std::uint64_t done, std::uint64_t total,
                                     double loss, double seeds_per_s) {
  if (!live_) return;
  std::fprintf(stderr, "\r\033[Kepoch %3d  batch %llu/%llu  loss %.4f  %.0f seeds/s", epoch,
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total), loss,
               seeds_per_s);
  std::fflush(stderr);
}

bool training_report::take_validation(const validation_point& p) {
  history_.push_back(p);
  if (!(p.valid > best_valid_)) return false;
  best_valid_ = p.valid;
  test_at_best_ = p.test;
  best_epoch_ = p.epoch;
  return true;
}

void training_report::restore(const std::vector<validation_point>& earlier) {
  for (const auto& p : earlier)
    take_validation(p);
}

void training_report::rewind(int last_epoch) {
  std::vector<validation_point> kept;
  for (const auto& p : history_)
    if (p.epoch <= last_epoch) kept.push_back(p);
  history_.clear();
  best_valid_ = -1;
  test_at_best_ = 0;
  best_epoch_ = 0;
  restore(kept);
}

bool training_report::epoch_done(const epoch_record& r) {
  if (observer_) observer_(r);
  ++totals_.epochs;
  totals_.setup_s += r.setup_s;
  totals_.train_s += r.epoch_s;
  totals_.eval_s += r.eval_s;
  totals_.setup_bytes += r.setup_bytes;
  totals_.train_bytes += r.bytes;
  totals_.eval_bytes += r.eval_bytes;
  if (live_) std::fprintf(stderr, "\r\033[K");
  std::printf("epoch %3d  loss %.4f  train %.4f", r.epoch, r.loss, r.train_acc);
  if (r.evaluated) std::printf("  valid %.4f  test %.4f", r.valid_acc, r.test_acc);
  std::printf("  time %.2fs", r.epoch_s);
  for (size_t i = 0; i < r.split.size(); ++i)
    std::printf("%s%s %.2f", i ? " + " : " = ", r.split[i].first.c_str(), r.split[i].second);
  if (r.evaluated) std::printf("  eval %.2fs", r.eval_s);
  if (r.bytes) std::printf("  %.2f MB sent", static_cast<double>(r.bytes) / 1e6);
  std::printf("\n");
  std::fflush(stdout);
  const bool best = r.evaluated && take_validation({r.epoch, r.valid_acc, r.test_acc});
  if (metrics_) {
    const int written = std::fprintf(
        metrics_,
        "{\"run\":\"%s\",\"epoch\":%d,\"loss\":%.6f,\"train_acc\":%.6f,\"evaluated\":%s,\"eval_"
        "train_acc\":%.6f,"
        "\"valid_acc\":%.6f,\"test_acc\":%.6f,\"epoch_s\":%.4f,\"split\":%s,\"sample_s\":%.4f,"
        "\"overlap_s\":%.4f,\"prepare_s\":%.4f,"
        "\"compute_s\":%.4f,\"eval_s\":%.4f,\"steps\":%llu,\"seeds\":%llu,\"bytes\":%llu,\"bytes_"
        "by_kind\":%s,"
        "\"eval_bytes\":%llu,\"setup_bytes\":%llu,\"setup_s\":%.4f,\"allreduce_s\":%.4f,\"work\":%"
        "s,"
        "\"peak_rss_mib\":%.1f}\n",
        run_.c_str(), r.epoch, r.loss, r.train_acc, r.evaluated ? "true" : "false",
        r.eval_train_acc, r.valid_acc, r.test_acc, r.epoch_s, split_json(r).c_str(), r.sample_s,
        r.overlap_s, r.prepare_s, r.compute_s, r.eval_s, static_cast<unsigned long long>(r.steps),
        static_cast<unsigned long long>(r.seeds), static_cast<unsigned long long>(r.bytes),
        r.bytes_by_kind_json.empty() ? "{}" : r.bytes_by_kind_json.c_str(),
        static_cast<unsigned long long>(r.eval_bytes),
        static_cast<unsigned long long>(r.setup_bytes), r.setup_s, r.allreduce_s,
        r.work_json.empty() ? "{}" : r.work_json.c_str(), peak_rss_mib());
    // A metrics line cut off by a full disk must not pass for a finished run.
    if (written < 0 || std::fflush(metrics_) != 0 || !sync_path_of(metrics_)) {
      throw std::runtime_error(metrics_file_ + ": cannot write the metrics line of epoch " +
                               std::to_string(r.epoch) + ": " + std::strerror(errno));
    }
  }
  return best;
}

void training_report::finish() {
  const run_totals& t = totals_;
  if (t.setup_bytes + t.train_bytes + t.eval_bytes > 0) {
    const auto mb = [](std::uint64_t b) { return static_cast<double>(b) / 1e6; };
    std::printf("end to end: set-up %.2f s %.2f MB + %d epoch(s) %.2f s %.2f MB", t.setup_s,
                mb(t.setup_bytes), t.epochs, t.train_s, mb(t.train_bytes));
    if (t.eval_bytes > 0 || t.eval_s > 0) {
      std::printf(" + evaluation %.2f s, with the checks and checkpoints between epochs %.2f MB",
                  t.eval_s, mb(t.eval_bytes));
    }
    std::printf(" = %.2f s %.2f MB\n", t.setup_s + t.train_s + t.eval_s,
                mb(t.setup_bytes + t.train_bytes + t.eval_bytes));
  }
  if (best_epoch_ == 0) {
    std::printf("no evaluation ran (see --eval-every)\n");
    return;
  }
  std::printf("test accuracy %.4f at best validation epoch %d (valid %.4f)\n", test_at_best_,
              best_epoch_, best_valid_);
}

}  // namespace degnn
