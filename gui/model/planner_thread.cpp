#include "gui/model/planner_thread.hpp"

#include "costmodel/memory.hpp"
#include "planner/plan_report.hpp"

namespace paraplan::gui {

std::shared_ptr<PlanSnapshot> build_snapshot(const Spec& spec, std::uint64_t generation) {
  auto s = std::make_shared<PlanSnapshot>();
  s->generation = generation;
  s->spec = spec;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    s->plan = make_plan(spec);
  } catch (const std::exception& e) {  // e.g. out of memory on an absurd spec: shown, not fatal
    s->error = e.what();
  }
  const auto t1 = std::chrono::steady_clock::now();
  s->layout_text.reserve(s->plan.candidates.size());
  for (const Candidate& c : s->plan.candidates) s->layout_text.push_back(to_string(c.layout));
  s->passed_over = passed_over_text(s->plan);
  s->gpu_bytes = gpu_memory_bytes(spec.cluster);
  s->usable_bytes = usable_memory_bytes(spec);
  const auto t2 = std::chrono::steady_clock::now();
  s->plan_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  s->prepare_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  return s;
}

PlannerThread::PlannerThread() : thread_([this] { run(); }) {}

PlannerThread::~PlannerThread() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void PlannerThread::set_on_done(std::function<void()> f) {
  std::lock_guard<std::mutex> lk(mu_);
  on_done_ = std::move(f);
}

std::uint64_t PlannerThread::request(const Spec& spec) {
  std::lock_guard<std::mutex> lk(mu_);
  pending_ = spec;
  pending_gen_ = ++next_gen_;
  pending_time_ = std::chrono::steady_clock::now();
  cv_.notify_all();
  return pending_gen_;
}

std::shared_ptr<const PlanSnapshot> PlannerThread::latest() const {
  std::lock_guard<std::mutex> lk(mu_);
  return latest_;
}

bool PlannerThread::busy() const {
  std::lock_guard<std::mutex> lk(mu_);
  return running_ || pending_.has_value();
}

bool PlannerThread::wait_idle(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lk(mu_);
  return cv_.wait_for(lk, timeout, [&] { return !running_ && !pending_.has_value(); });
}

void PlannerThread::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || pending_.has_value(); });
    if (stop_) return;
    Spec spec = std::move(*pending_);
    pending_.reset();
    const std::uint64_t gen = pending_gen_;
    const auto asked = pending_time_;
    running_ = true;
    lk.unlock();
    std::shared_ptr<PlanSnapshot> snap = build_snapshot(spec, gen);
    snap->requested = asked;
    lk.lock();
    running_ = false;
    latest_ = std::move(snap);
    auto done = on_done_;
    cv_.notify_all();
    lk.unlock();
    if (done) done();
    lk.lock();
  }
}

}  // namespace paraplan::gui
