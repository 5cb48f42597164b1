#include "checkpoint/async_save.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <ostream>
#include <vector>

#include "checkpoint/sharded_write.h"

namespace trident::checkpoint {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// "0.125 s", "15.2 MB": fixed, whatever the log stream's precision.
std::string fixed(double value, int decimals, const char* unit) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f %s", decimals, value, unit);
  return text;
}

// "1, 3": the world ranks whose flag is set.
std::string ranks_listed(const std::vector<double>& flags) {
  std::string out;
  for (size_t r = 0; r < flags.size(); ++r)
    if (flags[r] > 0) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

AsyncSaver::~AsyncSaver() {
  if (!writer_.joinable()) return;
  // A run failing elsewhere may never reach finish(): rank 0 then commits only if every
  // side-car is already there, instead of waiting for ranks that may be gone.
  if (std::uncaught_exceptions() > 0) give_up_ = true;
  writer_.join();
}

void AsyncSaver::save(const std::string& dir, const RunRecord& run, engine::RankModel& model,
                      const TrainingState& state, const engine::RankContext& rank,
                      std::ostream& log, const SaveOptions& options) {
  const Clock::time_point started = Clock::now();
  finish(rank, log);  // a new save waits for the previous one
  const double waited = seconds_since(started);
  snapshot_ = std::make_unique<SaveSnapshot>(
      take_snapshot(dir, run, model, state, rank, options, buffers_, true));
  file_done_ = false, file_finished_ = false, copied_ = false, give_up_ = false;
  file_error_.clear(), finish_error_.clear(), commit_error_.clear();
  write_seconds_ = 0, bytes_ = 0;
  writer_ = std::thread(&AsyncSaver::write, this);
  blocked_seconds_ = seconds_since(started);
  log << "checkpoint " << snapshot_->name << ": snapshot taken, writing in the background "
      << "(the step was blocked " << fixed(blocked_seconds_, 3, "s") << ": "
      << fixed(waited, 3, "s") << " waiting for the previous save, "
      << fixed(blocked_seconds_ - waited, 3, "s") << " taking it; "
      << fixed((double)buffers_.bytes() / 1e6, 1, "MB") << " to copy)\n";
}

// This rank's file (sharded: its pieces); then, sharded, data-parallel rank 0 finishes the
// file once every rank's pieces are there; then world rank 0 commits once every side-car is.
void AsyncSaver::write() {
  const Clock::time_point started = Clock::now();
  const SaveSnapshot& s = *snapshot_;
  copy_into_snapshot(s);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    copied_ = true;
  }
  file_written_.notify_all();
  std::string error;
  try {
    if (s.sharded)
      write_rank_pieces(s);
    else if (s.writes)
      write_rank_file(s);
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::string finish_error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    file_error_ = error, file_done_ = true;
  }
  file_written_.notify_all();
  if (s.sharded && s.writes && error.empty()) {
    try {
      finish_sharded_file(s, [this] { return !give_up_; });
    } catch (const std::exception& e) {
      finish_error = e.what();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finish_error_ = finish_error, file_finished_ = true;
  }
  file_written_.notify_all();
  if (s.commits && error.empty() && finish_error.empty()) {
    try {
      bytes_ = commit_snapshot(s, [this] { return !give_up_; });
    } catch (const std::exception& e) {
      commit_error_ = e.what();
    }
  }
  write_seconds_ = seconds_since(started);
}

void AsyncSaver::wait_until_copied() {
  if (!snapshot_) return;
  const Clock::time_point started = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  file_written_.wait(lock, [this] { return copied_; });
  blocked_seconds_ += seconds_since(started);
}

bool AsyncSaver::wait_for_own_file() {
  std::unique_lock<std::mutex> lock(mutex_);
  file_written_.wait(lock, [this] { return file_done_; });
  return file_error_.empty();
}

bool AsyncSaver::wait_for_finished_file() {
  std::unique_lock<std::mutex> lock(mutex_);
  file_written_.wait(lock, [this] { return file_finished_; });
  return finish_error_.empty();
}

void AsyncSaver::agree_on_failure(comm::Communicator& world, bool ok, const std::string& error,
                                  const std::string& what) {
  std::vector<double> failed(world.size(), 0.0);
  failed[world.rank()] = ok ? 0.0 : 1.0;
  world.all_reduce(failed.data(), (long)failed.size(), comm::ReduceOp::kSum);
  const std::string failing = ranks_listed(failed);
  if (failing.empty()) return;
  give_up_ = true;  // rank 0 stops waiting for the missing side-cars (and markers)
  stop_thread();
  const std::string name = snapshot_->name;
  snapshot_.reset();
  throw SaveError("checkpoint " + name + " was not written: " + what + " failed on world rank " +
                  failing + (error.empty() ? "" : " (this rank: " + error + ")") +
                  "; the previous checkpoint stays the latest");
}

void AsyncSaver::stop_thread() {
  if (writer_.joinable()) writer_.join();
}

void AsyncSaver::finish(const engine::RankContext& rank, std::ostream& log) {
  if (!snapshot_) return;
  comm::Communicator& world = *rank.groups->world;
  const std::string name = snapshot_->name;
  const std::string path = (snapshot_->dir / name).string();
  // Every rank's file first: the only collective waits on files that need no other rank.
  const bool written = wait_for_own_file();
  agree_on_failure(world, written, file_error_, "the background write");
  // Sharded: every rank's pieces are out, so each file's finishing ends.
  const bool finished = wait_for_finished_file();
  agree_on_failure(world, finished, finish_error_, "finishing the file (checksum, side-car)");
  stop_thread();
  snapshot_.reset();
  double commit_failed = commit_error_.empty() ? 0.0 : 1.0;
  world.all_reduce(&commit_failed, 1, comm::ReduceOp::kMax);
  if (commit_failed > 0)
    throw SaveError("checkpoint " + name + " was not committed" +
                    (commit_error_.empty() ? "" : ": " + commit_error_));
  if (rank.world_rank == 0)
    log << "saved checkpoint " << path << " (" << fixed(bytes_ / 1e6, 1, "MB") << " written in "
        << fixed(write_seconds_, 3, "s") << " in the background, "
        << fixed(bytes_ / 1e6 / write_seconds_, 1, "MB/s") << "; the step was blocked "
        << fixed(blocked_seconds_, 3, "s") << ")\n";
}

}  // namespace trident::checkpoint
