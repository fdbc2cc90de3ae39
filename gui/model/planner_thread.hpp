// Re-planning off the UI thread. The UI posts the current Spec on every edit;
// one worker thread runs make_plan on the newest request (older pending ones
// are dropped, so a burst of edits costs one plan, not one per edit) and
// publishes an immutable snapshot the UI picks up on its next frame.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "costmodel/spec.hpp"
#include "planner/search.hpp"

namespace paraplan::gui {

// A finished plan and what the views need from it, computed on the worker.
struct PlanSnapshot {
  std::uint64_t generation = 0;  // the request it answers
  Spec spec;
  Plan plan;
  std::vector<std::string> layout_text;  // to_string of each candidate's layout
  std::string passed_over;                // passed_over_text(plan): one pass over the candidates, once per plan
  std::int64_t gpu_bytes = 0, usable_bytes = 0;
  std::string error;      // make_plan failed (the plan is then empty)
  double plan_ms = 0;     // make_plan
  double prepare_ms = 0;  // layout strings
  std::chrono::steady_clock::time_point requested;  // when the UI asked
};

// Runs on the worker: make_plan plus the per-candidate strings.
std::shared_ptr<PlanSnapshot> build_snapshot(const Spec& spec, std::uint64_t generation);

class PlannerThread {
 public:
  PlannerThread();
  ~PlannerThread();
  PlannerThread(const PlannerThread&) = delete;
  PlannerThread& operator=(const PlannerThread&) = delete;

  // Called on the worker after each finished plan (e.g. to wake the UI loop).
  void set_on_done(std::function<void()> f);
  // Queues a plan of `spec`, replacing any request not yet started; returns its generation.
  std::uint64_t request(const Spec& spec);
  // The newest finished snapshot (null before the first).
  std::shared_ptr<const PlanSnapshot> latest() const;
  // True while a request is queued or running.
  bool busy() const;
  // Blocks until no request is queued or running, or the timeout passes.
  bool wait_idle(std::chrono::milliseconds timeout) const;

 private:
  void run();

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::optional<Spec> pending_;
  std::uint64_t pending_gen_ = 0, next_gen_ = 0;
  std::chrono::steady_clock::time_point pending_time_;
  bool running_ = false, stop_ = false;
  std::shared_ptr<const PlanSnapshot> latest_;
  std::function<void()> on_done_;
  std::thread thread_;
};

}  // namespace paraplan::gui
