#include "validate/gpu/phase_timer.hpp"

#include <stdexcept>

namespace paraplan::validate {

int SteadyPhaseClock::mark() {
  stamps_.push_back(std::chrono::steady_clock::now());
  return int(stamps_.size()) - 1;
}

double SteadyPhaseClock::elapsed_ms(int from, int to) {
  return std::chrono::duration<double, std::milli>(stamps_.at(to) - stamps_.at(from)).count();
}

void PhaseTimer::begin(const std::string& phase) {
  open_[phase].push_back(clock_->mark());
  ++open_count_;
}

void PhaseTimer::end(const std::string& phase) {
  auto it = open_.find(phase);
  if (it == open_.end() || it->second.empty())
    throw std::logic_error("PhaseTimer::end(\"" + phase + "\") without begin()");
  const int from = it->second.back();
  it->second.pop_back();
  --open_count_;
  closed_.push_back(Interval{phase, from, clock_->mark()});
}

void PhaseTimer::collect() {
  if (open_count_ != 0)
    throw std::logic_error("PhaseTimer::collect() with " + std::to_string(open_count_) +
                           " phase(s) still open");
  clock_->sync();
  for (const Interval& iv : closed_) {
    PhaseTotal& t = totals_[iv.phase];
    t.ms += clock_->elapsed_ms(iv.from, iv.to);
    ++t.count;
  }
  closed_.clear();
  open_.clear();
  clock_->reset();
}

PhaseTotal PhaseTimer::total(const std::string& phase) const {
  auto it = totals_.find(phase);
  return it == totals_.end() ? PhaseTotal{} : it->second;
}

}  // namespace paraplan::validate
