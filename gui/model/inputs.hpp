// What the Inputs panel edits: the effective Spec every plan is made from,
// where it came from, and the last load error (shown, never thrown). Changing
// anything bumps `revision`; the app re-plans whenever the revision moves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/spec.hpp"

namespace paraplan::gui {

struct Inputs {
  Spec spec;
  bool loaded = false;        // a spec has been loaded at least once
  std::string spec_path;      // the spec file ("" = none yet)
  std::string model_label;    // where the model came from (spec, file name)
  std::string cluster_label;
  std::string error;          // last load error as one line; "" = none
  std::uint64_t revision = 0;
};

// Each loader replaces its part of the spec and returns true, or keeps the
// spec as it was, sets `error` (file:line: field: message) and returns false.
bool load_spec_into(Inputs* in, const std::string& path);
bool load_model_into(Inputs* in, const std::string& path);  // paraplan YAML or HF config.json
bool load_cluster_into(Inputs* in, const std::string& path);

// Search constraint on one integer dimension: empty list = every value.
enum class Dim { kTp, kPp, kVpp, kMbs, kZero, kSp };
const std::vector<int>& constraint_list(const Spec& s, Dim d);
std::vector<int>* constraint_list(Spec* s, Dim d);
// Values offered as check boxes: divisors of the GPU count (tp, pp), of the
// layers (vpp), of the global batch (mbs), 0-3 (zero), 0-1 (sp); plus any
// value the spec's list holds that is not among them.
std::vector<int> constraint_choices(const Spec& s, Dim d);
bool constraint_allows(const std::vector<int>& list, int v);
// Turns value v on or off. Off from "every value" leaves every other choice;
// on when all choices end up on goes back to "every value" (empty list); the
// last allowed value cannot be turned off (returns false, list unchanged).
bool toggle_constraint(std::vector<int>* list, int v, const std::vector<int>& choices);
// The same for recompute and schedule (enum lists).
bool toggle_recompute(std::vector<Recompute>* list, Recompute r);
bool toggle_schedule(std::vector<Schedule>* list, Schedule s);

// Setters that keep the spec loadable (clamped to what the loader accepts) and
// bump the revision only when the value changes.
void set_nodes(Inputs* in, int nodes);
void set_global_batch(Inputs* in, int gbs);
void set_seq_length(Inputs* in, int seq);
void set_precision_of(Inputs* in, DType p);  // gradients and optimizer state follow unless given
void set_headroom(Inputs* in, double fraction);
void set_framework(Inputs* in, Framework f);  // whose memory accounting the plan predicts

}  // namespace paraplan::gui
