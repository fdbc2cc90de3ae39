// Inputs: the spec, model and cluster (from configs/ or any file), the
// training set-up and the search constraints. Every change bumps the inputs'
// revision; the session re-plans on the next frame, off the UI thread.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <fmt/format.h>

#include <filesystem>

#include "costmodel/memory.hpp"
#include "gui/views/style.hpp"
#include "planner/plan_report.hpp"
#include "gui/views/views.hpp"

namespace paraplan::gui {

namespace {

std::string stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// A combo over files, showing `current`; returns the picked path or "".
std::string file_combo(const char* label, const std::string& current, const std::vector<std::string>& files) {
  std::string picked;
  ImGui::SetNextItemWidth(-70);
  if (ImGui::BeginCombo(label, current.c_str())) {
    for (const std::string& f : files)
      if (ImGui::Selectable(stem(f).c_str(), false)) picked = f;
    ImGui::EndCombo();
  }
  return picked;
}

void section(const char* title) {
  ImGui::Spacing();
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.55f, 0.75f, 1.0f, 1.0f));
  ImGui::TextUnformatted(title);
  ImGui::PopStyleColor();
  ImGui::Separator();
}

// One row of check boxes for an integer dimension of the search.
void int_constraint(Inputs& in, const char* label, Dim dim) {
  std::vector<int>* list = constraint_list(&in.spec, dim);
  const std::vector<int> choices = constraint_choices(in.spec, dim);
  ImGui::PushID(label);
  ImGui::AlignTextToFramePadding();
  ImGui::Text("%-4s", label);
  ImGui::SameLine(48);
  bool any = list->empty();
  if (ImGui::Checkbox("any", &any) && any && !list->empty()) {
    list->clear();
    ++in.revision;
  }
  // Wrap the boxes onto further rows, aligned under the first one.
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  const float spacing = ImGui::GetStyle().ItemSpacing.x;
  for (int v : choices) {
    const std::string text = std::to_string(v);
    const float w = ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(text.c_str()).x;
    if (ImGui::GetItemRectMax().x + spacing + w <= right) ImGui::SameLine();
    else ImGui::SetCursorPosX(48);
    bool on = constraint_allows(*list, v);  // all on when unconstrained
    ImGui::PushID(v);
    if (ImGui::Checkbox(text.c_str(), &on) && toggle_constraint(list, v, choices)) ++in.revision;
    ImGui::PopID();
  }
  ImGui::PopID();
}

template <class T, class Toggle>
void enum_constraint(Inputs& in, const char* label, std::vector<T>* list, std::initializer_list<T> all,
                     const char* (*name)(T), Toggle toggle) {
  ImGui::PushID(label);
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted(label);
  ImGui::SameLine(96);
  for (T v : all) {
    bool on = list->empty() || std::find(list->begin(), list->end(), v) != list->end();
    if (ImGui::Checkbox(name(v), &on) && toggle(list, v)) ++in.revision;
    ImGui::SameLine();
  }
  ImGui::NewLine();
  ImGui::PopID();
}

void plan_summary(Session& s) {
  section("Plan");
  const PlanSnapshot* snap = s.plan();
  if (!snap) {
    ImGui::TextColored(kTextDim, s.planning() ? "planning..." : "no plan yet");
    return;
  }
  const Plan& p = snap->plan;
  ImGui::PushTextWrapPos(0);
  if (!snap->error.empty()) ImGui::TextColored(kTextOom, "planning failed: %s", snap->error.c_str());
  ImGui::Text("%lld layouts evaluated in %.1f ms, %lld fit", (long long)p.evaluated, snap->plan_ms,
              (long long)p.feasible);
  std::string rejected;
  for (int r = 0; r < kNumRejectReasons; ++r)
    if (p.rejected[r]) rejected += fmt::format("{}{} {}", rejected.empty() ? "" : ", ", reject_name(r), p.rejected[r]);
  if (!rejected.empty()) ImGui::TextColored(kTextDim, "rejected: %s", rejected.c_str());
  if (const Candidate* rec = p.recommended()) {
    ImGui::TextColored(kTextGood, "recommended: %s", snap->layout_text[0].c_str());
    ImGui::Text("%.2f GiB peak, %.3f s per step, MFU %.1f%%", double(rec->peak_bytes) / kGiB, rec->time.step_s,
                100 * rec->time.mfu);
    ImGui::TextColored(kTextDim, "why: %s.", why_recommended(p).c_str());
    if (!snap->passed_over.empty()) ImGui::TextColored(kTextWarn, "passed over: %s.", snap->passed_over.c_str());
    for (const std::string& w : candidate_warnings(p, *rec)) ImGui::TextColored(kTextWarn, "warning: %s", w.c_str());
    if (s.selected() != 0 && ImGui::Button("Select the recommended layout")) {
      s.select(0);
      s.ui.scroll_to_selection = true;
    }
  } else {
    ImGui::TextColored(kTextOom, "no layout fits: every valid layout runs out of memory");
  }
  ImGui::PopTextWrapPos();
}

void controls(Session& s) {
  Inputs& in = s.inputs;
  const Catalog& cat = s.catalog;

  section("Spec");
  {
    const std::string cur = in.spec_path.empty() ? "(none)" : stem(in.spec_path);
    const std::string p = file_combo("##spec", cur, cat.examples);
    if (!p.empty()) load_spec_into(&in, p);
    ImGui::SameLine();
    if (ImGui::Button("Open##spec", ImVec2(-1, 0)))
      open_file_dialog(FileTarget::kSpec, in.spec_path.empty() ? cat.dir : std::filesystem::path(in.spec_path).parent_path().string());
  }
  if (!in.error.empty()) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(kTextOom, "%s", in.error.c_str());
    ImGui::PopTextWrapPos();
  }
  if (!in.loaded) {
    ImGui::TextWrapped("Pick an example spec above, or open a spec file.");
    return;
  }
  Spec& spec = in.spec;

  ImGui::TextUnformatted("model");
  {
    const std::string p = file_combo("##model", spec.model.name, cat.models);
    if (!p.empty()) load_model_into(&in, p);
    ImGui::SameLine();
    if (ImGui::Button("Open##model", ImVec2(-1, 0)))
      open_file_dialog(FileTarget::kModel, cat.dir.empty() ? "." : cat.dir + "/models");
  }
  ImGui::PushTextWrapPos(0);
  ImGui::TextColored(kTextDim, "%.2fB params, %d layers, hidden %d, %d heads (%d kv)", double(total_params(spec.model)) / 1e9,
                     spec.model.num_layers, spec.model.hidden_size, spec.model.num_attention_heads,
                     spec.model.num_kv_heads);
  ImGui::PopTextWrapPos();
  ImGui::TextUnformatted("cluster");
  {
    const std::string p = file_combo("##cluster", spec.cluster.name, cat.clusters);
    if (!p.empty()) load_cluster_into(&in, p);
    ImGui::SameLine();
    if (ImGui::Button("Open##cluster", ImVec2(-1, 0)))
      open_file_dialog(FileTarget::kCluster, cat.dir.empty() ? "." : cat.dir + "/clusters");
  }
  ImGui::TextColored(kTextDim, "%d x %s per node, %.2f GiB each", spec.cluster.gpus_per_node,
                     spec.cluster.gpu.name.c_str(), spec.cluster.gpu.memory_gib);

  section("Training");
  const float field_w = ImGui::GetContentRegionAvail().x * 0.45f;
  int nodes = spec.num_nodes;
  ImGui::SetNextItemWidth(field_w);
  if (ImGui::InputInt("nodes", &nodes)) set_nodes(&in, nodes);
  ImGui::SameLine();
  ImGui::TextColored(kTextDim, "= %d GPUs", spec.num_gpus());
  int gbs = spec.training.global_batch_size;
  ImGui::SetNextItemWidth(field_w);
  if (ImGui::InputInt("global batch", &gbs, 8, 64)) set_global_batch(&in, gbs);
  int seq = spec.training.seq_length;
  ImGui::SetNextItemWidth(field_w);
  if (ImGui::InputInt("seq length", &seq, 512, 4096)) set_seq_length(&in, seq);
  int prec = int(spec.training.precision);
  ImGui::SetNextItemWidth(field_w);
  if (ImGui::Combo("precision", &prec, "bf16\0fp16\0fp32\0")) set_precision_of(&in, DType(prec));
  int fw = int(spec.training.framework);
  ImGui::SetNextItemWidth(field_w);
  if (ImGui::Combo("framework", &fw, "megatron\0deepspeed\0fsdp\0nanotron\0paraplan\0")) set_framework(&in, Framework(fw));
  float headroom = float(spec.memory_headroom * 100);
  ImGui::SetNextItemWidth(field_w);
  if (ImGui::SliderFloat("headroom", &headroom, 0.0f, 50.0f, "%.1f %%")) set_headroom(&in, headroom / 100.0);
  ImGui::TextColored(kTextDim, "usable %.2f of %.2f GiB per GPU", double(usable_memory_bytes(spec)) / kGiB,
                     double(gpu_memory_bytes(spec.cluster)) / kGiB);
  bool flash = spec.training.flash_attention;
  if (ImGui::Checkbox("flash attention", &flash)) spec.training.flash_attention = flash, ++in.revision;
  bool overlap = spec.training.overlap_dp_comm;
  if (ImGui::Checkbox("overlap DP communication", &overlap)) spec.training.overlap_dp_comm = overlap, ++in.revision;

  section("Search constraints");
  ImGui::TextColored(kTextDim, "unchecked values are not searched");
  int_constraint(in, "tp", Dim::kTp);
  int_constraint(in, "pp", Dim::kPp);
  int_constraint(in, "vpp", Dim::kVpp);
  int_constraint(in, "mbs", Dim::kMbs);
  int_constraint(in, "zero", Dim::kZero);
  int_constraint(in, "sp", Dim::kSp);
  enum_constraint(in, "recompute", &spec.search.recompute,
                  {Recompute::kNone, Recompute::kSelective, Recompute::kFull}, recompute_name, toggle_recompute);
  enum_constraint(in, "schedule", &spec.search.schedule, {Schedule::k1F1B, Schedule::kGPipe}, schedule_name,
                  toggle_schedule);
  bool across = spec.search.allow_tp_across_nodes;
  if (ImGui::Checkbox("allow tp across nodes", &across)) spec.search.allow_tp_across_nodes = across, ++in.revision;
  if (ImGui::Button("Clear all constraints")) {
    spec.search = SearchSpace{};
    ++in.revision;
  }
}

}  // namespace

void draw_inputs(Session& s) {
  // Wide (the view alone): controls on the left, the plan summary beside them.
  if (ImGui::GetContentRegionAvail().x > 900) {
    ImGui::BeginChild("##controls", ImVec2(440, 0));
    controls(s);
    ImGui::EndChild();
    ImGui::SameLine(0, 24);
    ImGui::BeginChild("##summary", ImVec2(std::min(ImGui::GetContentRegionAvail().x, 720.0f), 0));
    plan_summary(s);
    ImGui::EndChild();
    return;
  }
  controls(s);
  plan_summary(s);
}

}  // namespace paraplan::gui
