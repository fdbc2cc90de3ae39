// Reports of a whole plan (paraplan plan) and the time parts of one layout's
// report: table, JSON, CSV and Markdown from the same Plan.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "costmodel/time.hpp"
#include "planner/report.hpp"
#include "planner/search.hpp"

namespace paraplan {

// {"step_s", "compute_s", "tp_comm_s", "pp_comm_s", "dp_comm_s", "bubble_s", "optimizer_s", …}
nlohmann::json time_json(const StepTime& t);
// {"tokens_per_s", "tflops_per_gpu", "mfu", "hfu"}
nlohmann::json throughput_json(const StepTime& t);
// {"model_per_step", "hardware_per_step"}
nlohmann::json flops_json(const StepTime& t);

// Adds "time", "throughput", "flops" and "warnings" to a one-layout JSON
// document; `memory_warning` (memory_warning_message), when not empty, is the
// first warning.
void add_time_json(nlohmann::json* j, const StepTime& t, const std::string& memory_warning = std::string());
// A candidate's warnings: the memory one (an allocator flush), then the time ones.
std::vector<std::string> candidate_warnings(const Plan& plan, const Candidate& c);
// The time breakdown as text lines (explain, check -v, plan).
std::string time_text(const StepTime& t, const Layout& l);

// One sentence: why the recommended layout beats the runner-up.
std::string why_recommended(const Plan& plan);
// With experts: why the recommended layout (ep > 1) beats the fastest fitting
// layout with ep = 1 ("" when the recommendation has ep = 1 or there is none).
std::string why_expert_parallel(const Plan& plan);
// The fitting layouts predicted faster than the recommendation by more than the
// decision rule's band that rank after it for a warning (issue 15: plan
// recommends one the model can vouch for): how many, and the fastest of them
// (nullptr when none).
struct PassedOver {
  int count = 0;
  const Candidate* fastest = nullptr;
};
PassedOver passed_over(const Plan& plan);
// One sentence on them ("" when none).
std::string passed_over_text(const Plan& plan);
// Why candidate a ranks before b (`what` names b: "the runner-up"): the
// decision rule's deciding criterion (search.hpp, kTieBand); `fastest`:
// Plan::fastest_ranked_s, `usable`: Plan::usable_bytes.
std::string why_faster(const Candidate& a, const Candidate& b, const char* what, double fastest, std::int64_t usable);

// `defaults`: what paraplan chose because no spec or flag said (resolve_spec); shown in the header.
nlohmann::json plan_json(const Spec& spec, const Plan& plan, int top,
                         const nlohmann::json& defaults = nlohmann::json::object());
std::string render_plan(Format f, const Spec& spec, const Plan& plan, int top,
                        const nlohmann::json& defaults = nlohmann::json::object());

}  // namespace paraplan
