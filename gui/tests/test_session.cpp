// Inputs, the spec writer, the background planner and the session that ties
// them together: edits re-plan, the selection survives re-plans, bad input is
// an error message rather than a crash.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "fixtures.hpp"
#include <nlohmann/json.hpp>

#include "gui/model/files.hpp"
#include "gui/model/inputs.hpp"
#include "gui/model/layout_detail.hpp"
#include "gui/model/planner_thread.hpp"
#include "gui/model/session.hpp"
#include "gui/model/spec_writer.hpp"
#include "planner/plan_report.hpp"
#include "planner/spec_loader.hpp"

using namespace paraplan;
using namespace paraplan::gui;
using test::repo;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST_CASE("constraint check boxes", "[inputs]") {
  const std::vector<int> choices = {1, 2, 4, 8};
  std::vector<int> list;  // every value
  CHECK(constraint_allows(list, 4));
  CHECK(toggle_constraint(&list, 2, choices));  // off: every other choice stays on
  CHECK(list == std::vector<int>{1, 4, 8});
  CHECK_FALSE(constraint_allows(list, 2));
  CHECK(toggle_constraint(&list, 2, choices));  // back on: all on again = no constraint
  CHECK(list.empty());
  list = {4};
  CHECK_FALSE(toggle_constraint(&list, 4, choices));  // the last value stays
  CHECK(list == std::vector<int>{4});
  CHECK(toggle_constraint(&list, 1, choices));
  CHECK(list == std::vector<int>{1, 4});
  std::vector<int> single;  // one choice only: nothing to turn off
  CHECK_FALSE(toggle_constraint(&single, 1, {1}));
  CHECK(single.empty());

  std::vector<Recompute> rc;
  CHECK(toggle_recompute(&rc, Recompute::kFull));
  CHECK(rc == std::vector<Recompute>{Recompute::kNone, Recompute::kSelective});
  CHECK(toggle_recompute(&rc, Recompute::kFull));
  CHECK(rc.empty());
}

TEST_CASE("constraint choices come from the spec", "[inputs]") {
  Spec s = load_spec_file(repo("configs/examples/llama2-7b-dgx-h100.yaml"));
  CHECK(constraint_choices(s, Dim::kTp) == std::vector<int>{1, 2, 4, 8});  // divisors of 8 GPUs
  CHECK(constraint_choices(s, Dim::kZero) == std::vector<int>{0, 1, 2, 3});
  // 32 layers: divisors 1, 2, 4, 8, 16, 32.
  CHECK(constraint_choices(s, Dim::kVpp) == std::vector<int>{1, 2, 4, 8, 16, 32});
  s.search.tp = {3};  // a value the divisors lack still gets a box
  CHECK(constraint_choices(s, Dim::kTp) == std::vector<int>{1, 2, 3, 4, 8});
}

TEST_CASE("setters clamp and bump the revision only on change", "[inputs]") {
  Inputs in;
  REQUIRE(load_spec_into(&in, repo("configs/examples/llama2-7b-dgx-h100.yaml")));
  const auto r0 = in.revision;
  set_nodes(&in, 0);  // at least one node
  CHECK(in.spec.num_nodes == 1);
  CHECK(in.revision == r0);  // it was 1 already
  set_nodes(&in, 4);
  CHECK(in.spec.num_nodes == 4);
  CHECK(in.revision == r0 + 1);
  set_headroom(&in, 0.10);
  CHECK(in.spec.memory_headroom == Approx(0.10));
  set_precision_of(&in, DType::kFp32);
  CHECK(in.spec.training.precision == DType::kFp32);
  // The spec gives grad_dtype fp32, so it stays.
  CHECK(in.spec.training.grad_dtype == DType::kFp32);
  // Adam in fp32: no master copy, m + v = 8 B/param.
  CHECK(in.spec.training.optimizer_state_bytes == Approx(8));
  const auto r1 = in.revision;
  set_framework(&in, Framework::kNanotron);
  CHECK(in.spec.training.framework == Framework::kNanotron);
  CHECK(in.revision == r1 + 1);
  set_framework(&in, Framework::kNanotron);  // unchanged: no new plan
  CHECK(in.revision == r1 + 1);
}

TEST_CASE("a bad file is an error message and the spec is kept", "[inputs]") {
  Inputs in;
  REQUIRE(load_spec_into(&in, repo("configs/examples/tiny-cpu.yaml")));
  const std::string name = in.spec.model.name;
  const auto rev = in.revision;
  CHECK_FALSE(load_spec_into(&in, "/nonexistent/spec.yaml"));
  CHECK_THAT(in.error, Catch::Contains("/nonexistent/spec.yaml") && Catch::Contains("cannot read"));
  CHECK(in.spec.model.name == name);
  CHECK(in.revision == rev);
  CHECK_FALSE(load_cluster_into(&in, repo("configs/models/tiny-gpt.yaml")));  // a model, not a cluster
  CHECK_FALSE(in.error.empty());
  // A HuggingFace config.json is a model.
  REQUIRE(load_model_into(&in, repo("tests/data/hf/llama-2-7b-hf/config.json")));
  CHECK(in.error.empty());
  CHECK(in.spec.model.num_layers == 32);
  CHECK(in.revision == rev + 1);
  // GPT-2 has 1024 learned positions (n_positions in its config.json): a longer
  // sequence is cut to them on loading, and cannot be typed past them.
  in.spec.training.seq_length = 4096;
  REQUIRE(load_model_into(&in, repo("tests/data/hf/gpt2/config.json")));
  CHECK(in.spec.training.seq_length == 1024);
  set_seq_length(&in, 2048);
  CHECK(in.spec.training.seq_length == 1024);
  set_seq_length(&in, 512);
  CHECK(in.spec.training.seq_length == 512);
}

TEST_CASE("the spec writer round-trips through the loader", "[inputs]") {
  for (const char* f : {"configs/examples/llama2-7b-dgx-h100.yaml", "configs/examples/tiny-cpu.yaml",
                        "configs/examples/qwen2.5-72b-h200.yaml"}) {
    INFO(f);
    Spec a = load_spec_file(repo(f));
    a.memory_headroom = 0.0734;  // an edited value with many digits
    a.training.overlap_dp_comm = false;  // not the default
    a.cluster.optimizer_efficiency = 0.6;  // set, not the default (hbm_efficiency)
    a.cluster.strided_hbm_efficiency = 0.48;  // set, not the default (hbm_efficiency)
    a.cluster.flash_dropout_slowdown = 1.34;  // not the default
    a.cluster.flash_deterministic_slowdown = 1.05;  // not the default
    a.training.tp_async_allreduce = false;  // not the default
    a.training.overlap_p2p_comm = false;    // not the default
    a.training.deterministic = true;  // not the default
    a.training.framework = Framework::kNanotron;  // not the default (megatron)
    const fs::path tmp = fs::temp_directory_path() / "paraplan-gui-roundtrip.yaml";
    std::ofstream(tmp) << spec_to_yaml(a);
    const Spec b = load_spec_file(tmp.string());
    fs::remove(tmp);
    CHECK(b.model.name == a.model.name);
    CHECK(total_params(b.model) == total_params(a.model));
    CHECK(b.model.head_dim == a.model.head_dim);
    CHECK(b.model.tie_embeddings == a.model.tie_embeddings);
    CHECK(b.model.hidden_dropout == a.model.hidden_dropout);
    CHECK(b.cluster.gpu.memory_gib == a.cluster.gpu.memory_gib);
    CHECK(b.cluster.inter_node.bandwidth_gbs == a.cluster.inter_node.bandwidth_gbs);
    CHECK(b.cluster.intra_comm_efficiency == a.cluster.intra_comm_efficiency);
    CHECK(b.cluster.fragmentation == a.cluster.fragmentation);
    CHECK(b.cluster.optimizer_efficiency == a.cluster.optimizer_efficiency);
    CHECK(b.cluster.attention_efficiency == a.cluster.attention_efficiency);
    CHECK(b.num_nodes == a.num_nodes);
    CHECK(b.training.seq_length == a.training.seq_length);
    CHECK(b.training.grad_dtype == a.training.grad_dtype);
    CHECK(b.training.grad_dtype_given == a.training.grad_dtype_given);
    CHECK(b.training.framework == a.training.framework);
    CHECK(b.training.grad_bucket_params == a.training.grad_bucket_params);
    CHECK(b.cluster.runtime_overhead_gib == a.cluster.runtime_overhead_gib);
    CHECK(b.cluster.nccl_comm_mib == a.cluster.nccl_comm_mib);
    CHECK(b.cluster.nccl_channels == a.cluster.nccl_channels);
    CHECK(b.cluster.strided_hbm_efficiency == a.cluster.strided_hbm_efficiency);
    CHECK(b.cluster.flash_dropout_slowdown == a.cluster.flash_dropout_slowdown);
    CHECK(b.cluster.flash_deterministic_slowdown == a.cluster.flash_deterministic_slowdown);
    CHECK(b.training.tp_async_allreduce == a.training.tp_async_allreduce);
    CHECK(b.training.overlap_p2p_comm == a.training.overlap_p2p_comm);
    CHECK(b.training.overlap_p2p_comm_warmup_flush == a.training.overlap_p2p_comm_warmup_flush);
    CHECK(b.training.deterministic == a.training.deterministic);
    CHECK(b.training.optimizer_state_bytes == a.training.optimizer_state_bytes);
    CHECK(b.training.flash_attention == a.training.flash_attention);
    CHECK(b.training.overlap_dp_comm == a.training.overlap_dp_comm);
    CHECK(b.memory_headroom == a.memory_headroom);  // exact: written with 17 digits
    CHECK(b.search.tp == a.search.tp);
    CHECK(b.search.recompute == a.search.recompute);
    CHECK(b.default_layout == a.default_layout);
    // The same plan from both.
    const Plan pa = make_plan(a), pb = make_plan(b);
    CHECK(pa.evaluated == pb.evaluated);
    CHECK(pa.feasible == pb.feasible);
    if (!pa.candidates.empty()) CHECK(pa.candidates[0].layout == pb.candidates[0].layout);
  }
}

TEST_CASE("the planner thread answers the newest request", "[planner]") {
  const Spec s = load_spec_file(repo("configs/examples/llama2-7b-dgx-h100.yaml"));
  PlannerThread t;
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    Spec e = s;
    e.training.global_batch_size = 512 >> i;  // 512, 256, ..., 32
    last = t.request(e);
  }
  REQUIRE(t.wait_idle(30s));
  const auto snap = t.latest();
  REQUIRE(snap);
  CHECK(snap->generation == last);
  CHECK(snap->spec.training.global_batch_size == 32);
  CHECK(snap->layout_text.size() == snap->plan.candidates.size());
  CHECK(snap->plan.evaluated == make_plan(snap->spec).evaluated);
  // What plan passed over, worked out once per plan for the panel: the same sentence as the CLI's.
  CHECK(snap->passed_over == passed_over_text(snap->plan));
  const PassedOver po = passed_over(snap->plan);
  CHECK(snap->passed_over.empty() == (po.fastest == nullptr));
}

TEST_CASE("session: plan, select, re-plan keeps the selection", "[session]") {
  Session s;
  REQUIRE(load_spec_into(&s.inputs, repo("configs/examples/llama2-7b-dgx-h100.yaml")));
  REQUIRE(s.wait_for_plan(30s));
  REQUIRE(s.plan());
  const Plan& p = s.plan()->plan;
  REQUIRE(p.feasible > 0);
  CHECK(s.selected() == 0);  // the recommended layout
  REQUIRE(s.detail());
  CHECK(s.detail()->layout == p.candidates[0].layout);
  CHECK(s.table().rows().size() == p.candidates.size());

  // Select the NeMo recipe's layout by text.
  std::string err;
  REQUIRE(s.select_text("dp=4,tp=2,pp=1,zero=1,recompute=none,mbs=1", &err));
  const Layout recipe = s.detail()->layout;
  CHECK(recipe.dp == 4);
  REQUIRE(s.selected() >= 0);
  CHECK(s.plan()->plan.candidates[s.selected()].layout == recipe);

  // An edit re-plans; the layout is still in the new plan and stays selected.
  set_headroom(&s.inputs, 0.10);
  REQUIRE(s.wait_for_plan(30s));
  CHECK(s.plan()->spec.memory_headroom == Approx(0.10));
  REQUIRE(s.selected() >= 0);
  CHECK(s.plan()->plan.candidates[s.selected()].layout == recipe);
  CHECK(s.timing().layouts == s.plan()->plan.evaluated);
  CHECK(s.timing().latency_ms >= s.timing().plan_ms);

  // Two nodes: dp=4,tp=2 no longer uses every GPU; the recommended one is selected.
  set_nodes(&s.inputs, 2);
  REQUIRE(s.wait_for_plan(30s));
  CHECK(s.selected() == 0);

  // Errors name the field.
  CHECK_FALSE(s.select_text("dp=3,tp=2", &err));
  CHECK_THAT(err, Catch::Contains("dp"));
  CHECK_FALSE(s.select_text("tp=two", &err));
  CHECK_THAT(err, Catch::Contains("layout.tp"));
}

TEST_CASE("session: filters and sort reach the table", "[session]") {
  Session s;
  REQUIRE(load_spec_into(&s.inputs, repo("configs/examples/llama2-7b-dgx-h100.yaml")));
  REQUIRE(s.wait_for_plan(30s));
  s.ui.filter.fits_only = true;
  s.ui.sort = SortSpec{Column::kPeak, true};
  s.refresh_table();
  const auto& rows = s.table().rows();
  CHECK(std::int64_t(rows.size()) == s.plan()->plan.feasible);
  const auto& c = s.plan()->plan.candidates;
  for (size_t i = 1; i < rows.size(); ++i) CHECK(c[rows[i - 1]].peak_bytes <= c[rows[i]].peak_bytes);
}

TEST_CASE("layout detail: bars against the GPU, time terms, formulas", "[detail]") {
  // stack_segments by hand: 2 and 6 on a scale of 10; the zero is left out.
  const auto segs = stack_segments({{0, 2}, {1, 0}, {2, 6}}, 10);
  REQUIRE(segs.size() == 2);
  CHECK(segs[0].key == 0);
  CHECK(segs[0].x0 == 0);
  CHECK(segs[0].x1 == Approx(0.2));
  CHECK(segs[1].key == 2);
  CHECK(segs[1].x0 == Approx(0.2));
  CHECK(segs[1].x1 == Approx(0.8));

  const Spec s = load_spec_file(repo("configs/examples/llama2-7b-dgx-h100.yaml"));
  Layout l;
  std::string err;
  REQUIRE(resolve_layout_text(s, "dp=2,tp=2,pp=2,zero=1", &l, &err));
  const LayoutDetail d = make_detail(s, l);
  REQUIRE(d.stages.size() == 2);
  // The bars' scale is the GPU (the layout fits, so the peak is smaller).
  CHECK(d.scale_bytes == Approx(double(d.memory.gpu_bytes)));
  for (const StageBar& b : d.stages) {
    REQUIRE_FALSE(b.segments.empty());
    CHECK(b.segments.back().x1 == Approx(double(b.total) / d.scale_bytes));
  }
  CHECK(d.stages[d.memory.heaviest_stage].heaviest);
  // step = the sum of the six terms (time.hpp), so the time bar ends at 1.
  CHECK(d.time_segments.back().x1 == Approx(1.0));
  CHECK_THAT(d.explain_text, Catch::Contains("stage " + std::to_string(d.memory.heaviest_stage) + " terms"));
  CHECK(make_detail(s, l, 1).explain_text.find("stage 1 terms") != std::string::npos);
}

TEST_CASE("export: the plan as JSON and Markdown, written atomically", "[export]") {
  const Spec s = load_spec_file(repo("configs/examples/llama2-7b-dgx-h100.yaml"));
  const Plan p = make_plan(s);
  const nlohmann::json j = nlohmann::json::parse(export_plan(ExportFormat::kJson, s, p, 3));
  CHECK(j["candidates"].size() == 3);
  CHECK(j["evaluated"] == p.evaluated);
  CHECK(j["recommended"]["layout"] == to_string(p.candidates[0].layout));
  const std::string md = export_plan(ExportFormat::kMarkdown, s, p, 5);
  CHECK_THAT(md, Catch::StartsWith("## paraplan plan"));
  CHECK_THAT(md, Catch::Contains("| 5 | `"));  // the fifth ranked row

  const fs::path out = fs::temp_directory_path() / "paraplan-gui-export-test.md";
  CHECK(write_file_atomic(out.string(), md).empty());
  CHECK(read_text_file(out.string()) == md);
  CHECK_FALSE(fs::exists(out.string() + ".paraplan-tmp"));  // no temporary left behind
  fs::remove(out);
  CHECK_THAT(write_file_atomic("/nonexistent/dir/plan.md", md), Catch::Contains("cannot write"));
}

TEST_CASE("a GPU without BF16 switches the inputs to fp16 and refuses bf16 with a message", "[inputs]") {
  Inputs in;
  REQUIRE(load_spec_into(&in, repo("configs/examples/llama2-7b-dgx-h100.yaml")));
  REQUIRE(in.spec.training.precision == DType::kBf16);
  REQUIRE(load_cluster_into(&in, repo("configs/clusters/jean-zay-v100-32gb.yaml")));
  CHECK_FALSE(in.spec.cluster.gpu.bf16);
  CHECK(in.spec.training.precision == DType::kFp16);
  CHECK(in.spec.training.grad_dtype != DType::kBf16);
  const auto rev = in.revision;
  set_precision_of(&in, DType::kBf16);
  CHECK(in.spec.training.precision == DType::kFp16);
  CHECK(in.revision == rev);
  CHECK_THAT(in.error, Catch::Contains("GPU V100-SXM2-32GB has no BF16"));
  set_precision_of(&in, DType::kFp32);  // fp32 is fine
  CHECK(in.spec.training.precision == DType::kFp32);
}
