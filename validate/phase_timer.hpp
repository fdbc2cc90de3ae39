// Step time per phase (forward, backward, optimizer, each collective), so that
// validate compares measured and predicted time term by term (issue 6). The
// executor times every step through it, on every backend.
//
// A PhaseTimer only keeps books: phase boundaries are stamped by a PhaseClock
// — CUDA events on the compute stream for the GPU backend
// (Device::phase_clock, make_cuda_phase_clock in gpu_backend.hpp), std::chrono
// for the CPU (SteadyPhaseClock), a scripted clock in tests. Marks are recorded in queue
// order and read only at collect(), so timing a GPU phase never stalls the
// stream in the middle of a step.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace paraplan::validate {

class PhaseClock {
 public:
  virtual ~PhaseClock() = default;
  // Stamps the current point of the work queue; the handle is valid until reset().
  virtual int mark() = 0;
  // Waits until every mark made so far has been reached.
  virtual void sync() = 0;
  // Milliseconds from mark `from` to mark `to` (after sync()).
  virtual double elapsed_ms(int from, int to) = 0;
  // Forgets every mark; handles are reused from 0.
  virtual void reset() = 0;
};

// Host wall clock (CPU backend: work is done when the call returns).
class SteadyPhaseClock final : public PhaseClock {
 public:
  int mark() override;
  void sync() override {}
  double elapsed_ms(int from, int to) override;
  void reset() override { stamps_.clear(); }

 private:
  std::vector<std::chrono::steady_clock::time_point> stamps_;
};

struct PhaseTotal {
  double ms = 0;
  // ms less the time of the intervals nested directly inside these ones (a
  // "forward" without the "tp all_reduce"s it contains: its compute).
  double self_ms = 0;
  std::int64_t count = 0;  // intervals summed into ms
};

class PhaseTimer {
 public:
  explicit PhaseTimer(PhaseClock* clock) : clock_(clock) {}

  // Phases may nest and overlap ("backward" around "tp all_reduce"); the same
  // name may nest too: end() closes the innermost open interval of that name.
  // An interval's parent is the innermost interval open when it began.
  void begin(const std::string& phase);
  // Throws std::logic_error when `phase` is not open (a bug in the caller).
  void end(const std::string& phase);

  // Waits for the clock, adds every closed interval to the totals and forgets
  // the marks. Throws std::logic_error while any phase is open.
  void collect();

  const std::map<std::string, PhaseTotal>& totals() const { return totals_; }
  PhaseTotal total(const std::string& phase) const;
  void clear_totals() { totals_.clear(); }
  int open_phases() const { return open_count_; }
  std::int64_t pending_intervals() const { return std::int64_t(intervals_.size()) - open_count_; }

 private:
  struct Interval {
    std::string phase;
    int from = 0, to = -1;  // marks; to < 0 while open
    int parent = -1;        // index into intervals_
  };
  PhaseClock* clock_;
  std::unordered_map<std::string, std::vector<int>> open_;  // name -> stack of open intervals
  std::vector<int> stack_;                                  // open intervals, in begin order
  int open_count_ = 0;
  std::vector<Interval> intervals_;  // since the last collect()
  std::map<std::string, PhaseTotal> totals_;
};

// begin() on construction, end() on destruction.
class ScopedPhase {
 public:
  ScopedPhase(PhaseTimer* t, std::string phase) : t_(t), phase_(std::move(phase)) {
    if (t_) t_->begin(phase_);
  }
  ~ScopedPhase() {
    if (t_) t_->end(phase_);
  }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseTimer* t_;
  std::string phase_;
};

}  // namespace paraplan::validate
