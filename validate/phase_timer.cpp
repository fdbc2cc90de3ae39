#include "validate/phase_timer.hpp"

#include <algorithm>
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
  const int id = int(intervals_.size());
  intervals_.push_back(Interval{phase, clock_->mark(), -1, stack_.empty() ? -1 : stack_.back()});
  open_[phase].push_back(id);
  stack_.push_back(id);
  ++open_count_;
}

void PhaseTimer::end(const std::string& phase) {
  auto it = open_.find(phase);
  if (it == open_.end() || it->second.empty())
    throw std::logic_error("PhaseTimer::end(\"" + phase + "\") without begin()");
  const int id = it->second.back();
  it->second.pop_back();
  --open_count_;
  intervals_[std::size_t(id)].to = clock_->mark();
  // Usually the top of the stack; overlapping (not nested) phases close out of order.
  stack_.erase(std::find(stack_.begin(), stack_.end(), id));
}

void PhaseTimer::collect() {
  if (open_count_ != 0)
    throw std::logic_error("PhaseTimer::collect() with " + std::to_string(open_count_) +
                           " phase(s) still open");
  clock_->sync();
  std::vector<double> ms(intervals_.size()), nested(intervals_.size(), 0.0);
  for (std::size_t i = 0; i < intervals_.size(); ++i) {
    ms[i] = clock_->elapsed_ms(intervals_[i].from, intervals_[i].to);
    if (intervals_[i].parent >= 0) nested[std::size_t(intervals_[i].parent)] += ms[i];
  }
  for (std::size_t i = 0; i < intervals_.size(); ++i) {
    PhaseTotal& t = totals_[intervals_[i].phase];
    t.ms += ms[i];
    t.self_ms += ms[i] - nested[i];
    ++t.count;
  }
  intervals_.clear();
  open_.clear();
  stack_.clear();
  clock_->reset();
}

PhaseTotal PhaseTimer::total(const std::string& phase) const {
  auto it = totals_.find(phase);
  return it == totals_.end() ? PhaseTotal{} : it->second;
}

}  // namespace paraplan::validate
