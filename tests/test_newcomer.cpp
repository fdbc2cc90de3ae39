// Issue 17, a newcomer's first five minutes: a plan from a model name and a
// GPU count with no spec file, the built-in catalogs, and specs that name them.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "cli_runner.hpp"
#include "planner/catalog.hpp"
#include "planner/progress.hpp"
#include "planner/spec_inputs.hpp"

using namespace paraplan::test;
using nlohmann::json;

namespace {

std::string fmt_count(const std::string& prefix, std::int64_t n) { return prefix + std::to_string(n) + " layouts in "; }

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

TEST_CASE("plan --model NAME --gpus N --gpu NAME works from any directory, with the defaults said", "[newcomer][cli]") {
  TempDir dir;  // outside the checkout: the catalog is in the binary
  Result r = run_paraplan({"plan", "--model", "llama-3.1-70b", "--gpus", "64", "--gpu", "h100"}, dir.path());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("recommended: ") != std::string::npos);
  CHECK(r.out.find("Llama-3.1-70B on 8 x DGX-H100 = 64 x H100-SXM5-80GB") != std::string::npos);
  // Defaults: seq 4096; batch 4 Mi tokens / 4096 = 1024 sequences, already a multiple of 64 GPUs.
  CHECK(r.out.find("defaults used: seq_length 4096") != std::string::npos);
  CHECK(r.out.find("global_batch_size 1024") != std::string::npos);
  CHECK(r.out.find("framework megatron") != std::string::npos);

  r = run_paraplan({"plan", "--model", "llama-3.1-70b", "--gpus", "64", "--gpu", "h100", "--format", "json",
                    "--seq-length", "8192"},
                   dir.path());
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["num_gpus"] == 64);
  CHECK_FALSE(j["defaults"].contains("seq_length"));  // given, so not a default
  CHECK(j["defaults"]["global_batch_size"] == 512);  // 4 Mi / 8192 = 512
  CHECK(j["defaults"]["precision"] == "bf16");
  CHECK(j["defaults"]["framework"] == "megatron");
  CHECK(j["recommended"].is_object());

  // --framework given: no longer a default.
  r = run_paraplan({"plan", "--model", "llama-3.1-8b", "--gpus", "8", "--gpu", "H100-SXM5-80GB", "--framework", "fsdp",
                    "--format", "json"},
                   dir.path());
  REQUIRE(r.code == 0);
  CHECK_FALSE(json::parse(r.out)["defaults"].contains("framework"));
}

TEST_CASE("plan --model path/to/config.json takes a bare HuggingFace config", "[newcomer][cli]") {
  TempDir dir;
  fs::create_directories(dir.path() / "path/to");
  fs::copy_file(fs::path(PARAPLAN_SOURCE_DIR) / "tests/data/hf/llama-2-7b-hf/config.json",
                dir.path() / "path/to/config.json");
  const Result r = run_paraplan({"plan", "--model", "path/to/config.json", "--gpus", "8", "--gpu", "h100"}, dir.path());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("recommended: ") != std::string::npos);
  CHECK(r.out.find("= 8 x H100-SXM5-80GB") != std::string::npos);
}

TEST_CASE("explain and check take --model, --gpus and --gpu too", "[newcomer][cli]") {
  TempDir dir;
  Result r = run_paraplan({"explain", "--model", "llama-2-7b", "--gpus", "8", "--gpu", "a100", "--layout",
                           "dp=8,tp=1,pp=1,zero=1,recompute=selective,mbs=1", "--format", "json"},
                          dir.path());
  REQUIRE(r.code == 0);
  json j = json::parse(r.out);
  CHECK(j["defaults"]["seq_length"] == 4096);
  CHECK(j["defaults"]["global_batch_size"] == 1024);
  r = run_paraplan({"check", "--model", "llama-2-7b", "--gpus", "8", "--gpu", "a100", "--layout",
                    "dp=8,tp=1,pp=1,zero=1,recompute=selective,mbs=1", "-v"},
                   dir.path());
  CHECK((r.code == 0 || r.code == 1));
  CHECK(r.out.find("defaults used: seq_length 4096") != std::string::npos);
  // Fewer GPUs than a node: one node of that many.
  r = run_paraplan({"check", "--model", "llama-2-7b", "--gpus", "4", "--gpu", "a100", "--layout",
                    "dp=4,zero=3,recompute=full,mbs=1", "--format", "json"},
                   dir.path());
  REQUIRE((r.code == 0 || r.code == 1));
  CHECK(json::parse(r.out)["layout"] == "dp=4,tp=1,pp=1,vpp=1,sp=0,zero=3,recompute=full,mbs=1,schedule=1f1b");
}

TEST_CASE("names the newcomer flags refuse: one line, exit 2, naming the flag", "[newcomer][cli]") {
  TempDir dir;
  struct Bad {
    std::vector<std::string> args;
    std::string says;
  } bad[] = {
      {{"plan", "--model", "llama-9", "--gpus", "8", "--gpu", "h100"}, "--model: no file and no built-in model named 'llama-9'"},
      {{"plan", "--model", "llama-2-7b", "--gpus", "8", "--gpu", "p100"}, "--gpu: no file and no built-in GPU"},
      {{"plan", "--model", "llama-2-7b", "--gpus", "12", "--gpu", "h100"}, "--gpus: expected a multiple of the 8 GPUs per node"},
      {{"plan", "--model", "llama-2-7b", "--gpus", "8"}, "(missing: --gpu)"},
      {{"plan", "--gpus", "8", "--gpu", "h100"}, "(missing: --model)"},
      {{"plan", "--model", "llama-2-7b", "--gpus", "8", "--nodes", "2", "--gpu", "h100"}, "give --gpus or --nodes"},
      {{"plan", "--model", "gpt3-175b", "--gpus", "8", "--gpu", "h100", "--seq-length", "4096"},
       "--seq-length: expected at most 2048"},
  };
  for (const Bad& b : bad) {
    INFO(b.args[1] << " " << b.args[2]);
    const Result r = run_paraplan(b.args, dir.path());
    CHECK(r.code == 2);
    CHECK(r.signal == 0);
    CHECK(r.out.empty());
    CHECK(r.err.find(b.says) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

TEST_CASE("a spec may name a built-in model and cluster (a file of that name wins)", "[newcomer][cli]") {
  TempDir dir;
  write(dir.path() / "spec.yaml",
        "model: llama-3.1-8b\ncluster: dgx-h100\nnum_nodes: 1\n"
        "training: {seq_length: 4096, global_batch_size: 256}\nlayout: dp=2,tp=4,zero=1,recompute=selective,mbs=1\n");
  Result r = run_paraplan({"explain", "spec.yaml", "--format", "json"}, dir.path());
  REQUIRE(r.code == 0);
  json j = json::parse(r.out);
  CHECK(j["model"] == "Llama-3.1-8B");
  CHECK(j["defaults"].empty());  // the spec said everything
  // A local file named like a built-in is read instead.
  write(dir.path() / "llama-3.1-8b",
        "name: local\nnum_layers: 2\nhidden_size: 256\nnum_attention_heads: 8\nffn_hidden_size: 1024\n"
        "vocab_size: 1000\nactivation: gelu\nnormalization: layernorm\ntie_embeddings: true\nposition_embedding: rope\n");
  r = run_paraplan({"explain", "spec.yaml", "--format", "json"}, dir.path());
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["model"] == "local");
  write(dir.path() / "bad.yaml", "model: llama-9\ncluster: h100\nnum_nodes: 1\ntraining: {seq_length: 8, global_batch_size: 8}\n");
  r = run_paraplan({"plan", "bad.yaml"}, dir.path());
  CHECK(r.code == 2);
  CHECK(r.err.find("bad.yaml:1: model: file not found") != std::string::npos);
  CHECK(r.err.find("llama-3.1-70b") != std::string::npos);  // the names are listed
}

TEST_CASE("paraplan models and paraplan gpus list every file in configs/ with its published numbers", "[newcomer][cli]") {
  TempDir dir;
  Result r = run_paraplan({"models", "--format", "json"}, dir.path());
  REQUIRE(r.code == 0);
  const json models = json::parse(r.out);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(fs::path(PARAPLAN_SOURCE_DIR) / "configs/models"))
    files += e.path().extension() == ".yaml";
  CHECK(models.size() == files);
  bool seen70 = false;
  for (const json& m : models)
    if (m["name"] == "llama-3.1-70b") {
      seen70 = true;
      CHECK(m["parameters"] == 70553706496LL);  // Meta's published count for Llama-3.1-70B
      CHECK(m["layers"] == 80);
    }
  CHECK(seen70);
  r = run_paraplan({"gpus", "--format", "json"}, dir.path());
  REQUIRE(r.code == 0);
  const json gpus = json::parse(r.out);
  bool seen_h100 = false;
  for (const json& g : gpus)
    if (g["name"] == "h100") {
      seen_h100 = true;
      CHECK(g["peak_tflops_bf16"] == 989.0);  // H100 SXM datasheet: 1,979 with sparsity / 2
      CHECK(g["hbm_bandwidth_gbs"] == 3350.0);
      CHECK(g["gpus_per_node"] == 8);
    }
  CHECK(seen_h100);
  r = run_paraplan({"models"}, dir.path());
  CHECK(r.code == 0);
  CHECK(r.out.find("llama-3.1-405b") != std::string::npos);
  r = run_paraplan({"gpus", "--format", "markdown"}, dir.path());
  CHECK(r.code == 0);
  CHECK(r.out.find("| `h200` |") != std::string::npos);
}

TEST_CASE("catalog lookups and the default batch, by hand", "[newcomer]") {
  using namespace paraplan;
  REQUIRE(find_builtin_model("Llama-3.1-70B") != nullptr);
  CHECK(std::string(find_builtin_model("Llama-3.1-70B")->name) == "llama-3.1-70b");
  CHECK(std::string(find_builtin_model("Mistral-7B-v0.1")->name) == "mistral-7b");
  CHECK(find_builtin_model("llama") == nullptr);
  CHECK(std::string(find_builtin_cluster("H100")->name) == "dgx-h100");
  CHECK(std::string(find_builtin_cluster("dgx-a100-80gb")->name) == "dgx-a100-80gb");
  CHECK(std::string(find_builtin_cluster("H200-SXM-141GB")->name) == "h200-node");
  // 4 Mi tokens: 4194304 / 4096 = 1024; / 2048 = 2048 -> next multiple of 24 is 86 * 24 = 2064;
  // / 8192 = 512 on 16384 GPUs -> 16384.
  CHECK(default_global_batch(4096, 64) == 1024);
  CHECK(default_global_batch(2048, 24) == 2064);
  CHECK(default_global_batch(8192, 16384) == 16384);
  // GPT-3's learned position table has 2048 rows: the default sequence stops there.
  CHECK(default_seq_length(resolve_model("gpt3-175b", "--model")) == 2048);
  CHECK(default_seq_length(resolve_model("llama-2-7b", "--model")) == 4096);
}

TEST_CASE("plan names the spec's search constraints and its counts add up", "[newcomer][plan][cli]") {
  TempDir dir;
  const std::string spec = "@SRC@/configs/examples/llama3.1-70b-h100-64.yaml";  // search: tp [4, 8], pp [2, 4, 8], ...
  Result r = run_paraplan({"plan", spec, "--top", "3"}, dir.path());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("search limited by the spec's search: ") != std::string::npos);
  CHECK(r.out.find("tp [4, 8]") != std::string::npos);
  CHECK(r.out.find("pp [2, 4, 8]") != std::string::npos);
  CHECK(r.out.find("recompute [none, selective, full]") != std::string::npos);
  r = run_paraplan({"plan", spec, "--format", "json"}, dir.path());
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["constraints"]["tp"] == json::array({4, 8}));
  CHECK(j["constraints"]["zero"] == json::array({1, 2, 3}));
  // enumerated = evaluated + invalid; evaluated = fit + out of memory; invalid = the other reasons.
  std::int64_t invalid = 0;
  for (const auto& [k, v] : j["rejected"].items())
    if (k != "out_of_memory") invalid += v.get<std::int64_t>();
  CHECK(j["invalid"].get<std::int64_t>() == invalid);
  CHECK(j["enumerated"].get<std::int64_t>() == j["evaluated"].get<std::int64_t>() + invalid);
  CHECK(j["evaluated"].get<std::int64_t>() ==
        j["feasible"].get<std::int64_t>() + j["rejected"]["out_of_memory"].get<std::int64_t>());
  // The same numbers in the text's last lines.
  r = run_paraplan({"plan", spec}, dir.path());
  CHECK(r.out.find(fmt_count("enumerated ", j["enumerated"].get<std::int64_t>())) != std::string::npos);
  CHECK(r.out.find(std::to_string(j["evaluated"].get<std::int64_t>()) + " evaluated (" +
                   std::to_string(j["feasible"].get<std::int64_t>()) + " fit, " +
                   std::to_string(j["rejected"]["out_of_memory"].get<std::int64_t>()) + " out of memory), " +
                   std::to_string(invalid) + " invalid") != std::string::npos);
  // A spec without search: says nothing about constraints.
  r = run_paraplan({"plan", "--model", "llama-3.1-8b", "--gpus", "8", "--gpu", "h100"}, dir.path());
  CHECK(r.out.find("search limited") == std::string::npos);
}

TEST_CASE("when nothing fits plan lists the closest by memory and the smallest GPU count that fits", "[newcomer][plan][cli]") {
  TempDir dir;
  // Llama-3.1-70B with Adam on one node: 70.6e9 params x 16 B of model state = 1.05 TiB > 8 x 80 GiB.
  Result r = run_paraplan({"plan", "--model", "llama-3.1-70b", "--gpus", "8", "--gpu", "h100", "--format", "json",
                           "--top", "20"},
                          dir.path());
  REQUIRE(r.code == 0);
  json j = json::parse(r.out);
  CHECK(j["recommended"].is_null());
  const json& c = j["candidates"];
  REQUIRE(c.size() == 20);
  for (size_t i = 1; i < c.size(); ++i)
    CHECK(c[i - 1]["peak_memory_bytes"].get<std::int64_t>() <= c[i]["peak_memory_bytes"].get<std::int64_t>());
  CHECK(j["nothing_fits"]["closest"] == c[0]["layout"]);
  const int gpus = j["nothing_fits"]["smallest_gpus_that_fit"].get<int>();
  CHECK(gpus % 8 == 0);
  CHECK(gpus > 8);
  // At that count a plan recommends something; one node fewer, nothing fits.
  r = run_paraplan({"plan", "--model", "llama-3.1-70b", "--gpus", std::to_string(gpus), "--gpu", "h100",
                    "--global-batch-size", "1024", "--format", "json"},
                   dir.path());
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["recommended"].is_object());
  r = run_paraplan({"plan", "--model", "llama-3.1-70b", "--gpus", std::to_string(gpus - 8), "--gpu", "h100",
                    "--global-batch-size", "1024", "--format", "json"},
                   dir.path());
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["recommended"].is_null());
  r = run_paraplan({"plan", "--model", "llama-3.1-70b", "--gpus", "8", "--gpu", "h100"}, dir.path());
  CHECK(r.out.find("no layout fits: the closest, ") != std::string::npos);
  CHECK(r.out.find("The smallest GPU count that fits: " + std::to_string(gpus) + " GPUs = " + std::to_string(gpus / 8) +
                   " nodes of 8 (--gpus " + std::to_string(gpus) + ")") != std::string::npos);
  CHECK(r.out.find("The table lists the closest first, by peak memory.") != std::string::npos);
}

TEST_CASE("a network given as NICs per node and Gb/s is converted to GB/s per GPU and shown", "[newcomer][spec]") {
  TempDir dir;
  // One 100 GbE NIC shared by 8 GPUs: 1 x 100 Gb/s / 8 bits / 8 GPUs = 1.5625 GB/s per GPU, not 12.5.
  write(dir.path() / "c.yaml",
        "name: one-nic\ngpu: {name: H100, memory_gib: 80, peak_tflops_bf16: 989, hbm_bandwidth_gbs: 3350}\n"
        "gpus_per_node: 8\nintra_node: {bandwidth_gbs: 450, latency_us: 3}\n"
        "inter_node: {nics_per_node: 1, nic_gbps: 100, latency_us: 14}\n");
  write(dir.path() / "s.yaml",
        "model: llama-3.1-8b\ncluster: c.yaml\nnum_nodes: 2\ntraining: {seq_length: 4096, global_batch_size: 256}\n"
        "layout: dp=16,zero=1,mbs=1,recompute=full\n");
  Result r = run_paraplan({"explain", "s.yaml", "--format", "json"}, dir.path());
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["network"]["inter_node_gbs_per_gpu"].get<double>() == 1.5625);
  CHECK(j["network"]["nics_per_node"] == 1);
  CHECK(j["network"]["nic_gbps"] == 100.0);
  r = run_paraplan({"explain", "s.yaml"}, dir.path());
  CHECK(r.out.find("network 1.562 GB/s per GPU per direction (1 x 100 Gb/s NICs per node / 8 GPUs)") != std::string::npos);
  // The shipped DGX H100: 8 x 400 Gb/s ConnectX-7 = 50 GB/s per GPU.
  r = run_paraplan({"gpus", "--format", "json"}, dir.path());
  for (const json& g : json::parse(r.out))
    if (g["name"] == "h100") CHECK(g["inter_node_gbs_per_gpu"].get<double>() == 50.0);
  // Both forms at once is an error naming the field.
  write(dir.path() / "c.yaml",
        "name: x\ngpu: {name: H100, memory_gib: 80, peak_tflops_bf16: 989, hbm_bandwidth_gbs: 3350}\n"
        "gpus_per_node: 8\nintra_node: {bandwidth_gbs: 450, latency_us: 3}\n"
        "inter_node: {bandwidth_gbs: 12.5, nics_per_node: 1, nic_gbps: 100, latency_us: 14}\n");
  r = run_paraplan({"explain", "s.yaml"}, dir.path());
  CHECK(r.code == 2);
  CHECK(r.err.find("inter_node.bandwidth_gbs: give bandwidth_gbs (GB/s per GPU) or nics_per_node and nic_gbps, not both") !=
        std::string::npos);
}

TEST_CASE("a spec may leave out training: (defaults said) and a model file given as SPEC says what to run", "[newcomer][cli]") {
  TempDir dir;
  write(dir.path() / "s.yaml", "model: llama-2-7b\ncluster: h100\nnum_nodes: 2\n");
  Result r = run_paraplan({"plan", "s.yaml", "--format", "json", "--top", "1"}, dir.path());
  REQUIRE(r.code == 0);
  json j = json::parse(r.out);
  CHECK(j["defaults"]["seq_length"] == 4096);
  CHECK(j["defaults"]["global_batch_size"] == 1024);  // 4 Mi tokens / 4096, a multiple of 16 GPUs
  CHECK_FALSE(j["defaults"].contains("framework"));  // a spec's framework default is the schema's, not a guess
  // --nodes changes the GPU count the default batch is rounded to: 4 Mi / 4096 = 1024 -> next multiple of 24 is 1032.
  r = run_paraplan({"plan", "s.yaml", "--nodes", "3", "--format", "json", "--top", "1"}, dir.path());
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["defaults"]["global_batch_size"] == 1032);
  // A given seq_length is not a default; the batch still is.
  write(dir.path() / "s.yaml", "model: llama-2-7b\ncluster: h100\nnum_nodes: 1\ntraining: {seq_length: 2048}\n");
  r = run_paraplan({"plan", "s.yaml", "--format", "json", "--top", "1"}, dir.path());
  REQUIRE(r.code == 0);
  j = json::parse(r.out);
  CHECK_FALSE(j["defaults"].contains("seq_length"));
  CHECK(j["defaults"]["global_batch_size"] == 2048);  // 4 Mi / 2048

  for (const char* model : {"@SRC@/tests/data/hf/gpt2/config.json", "@SRC@/configs/models/llama-2-7b.yaml"}) {
    r = run_paraplan({"plan", model}, dir.path());
    CHECK(r.code == 2);
    CHECK(r.err.find("not a plan spec; run e.g. paraplan plan --model ") != std::string::npos);
  }
  // Issue 46: a spec in YAML flow style (one line of braces) is a spec, not a HuggingFace config.json; so is
  // one written as JSON with a model key.
  write(dir.path() / "flow.yaml", "{model: llama-2-7b, cluster: h100, num_nodes: 1, training: {seq_length: 2048}}\n");
  r = run_paraplan({"plan", "flow.yaml", "--format", "json", "--top", "1"}, dir.path());
  INFO(r.err);
  CHECK(r.code == 0);
  write(dir.path() / "spec.json", "{\"model\": \"llama-2-7b\", \"cluster\": \"h100\", \"num_nodes\": 1}\n");
  r = run_paraplan({"plan", "spec.json", "--format", "json", "--top", "1"}, dir.path());
  INFO(r.err);
  CHECK(r.code == 0);
}

namespace {

// Runs paraplan on a pseudo-terminal (util-linux script), as a user at a
// terminal would: returns everything the terminal showed.
std::string on_terminal(const std::string& args, const fs::path& dir, const std::string& env = "") {
  const fs::path out = dir / "terminal.out";
  const std::string cmd = "cd " + shell_quote(dir.string()) + " && " + env + " timeout 120 script -qec " +
                          shell_quote(shell_quote(PARAPLAN_BINARY) + " " + args) + " /dev/null > " +
                          shell_quote(out.string()) + " 2>&1 </dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  return read_file(out);
}

}  // namespace

// [slow]: not rerun under ASan (142 s there, 2026-11-27: calibrate and validate on a pseudo-terminal; what it
// checks is terminal output, and the runs' memory safety is covered by the validate cases that ASan does run).
TEST_CASE("validate and calibrate show progress on a terminal and nothing when not on one", "[newcomer][cli][mpi][slow]") {
  using paraplan::progress_step;
  CHECK(progress_step("step 2 F chunk 0 mb 3") == 2);
  CHECK(progress_step("step 0 B chunk 1 mb 0 layer 3") == 0);
  CHECK(progress_step("done") == -1);
  TempDir dir;
  const std::string spec = shell_quote(std::string(PARAPLAN_SOURCE_DIR) + "/configs/examples/tiny-cpu.yaml");
  // Two ranks under mpirun: the launcher shows the slowest rank's step.
  std::string t = on_terminal("validate " + spec + " --layout dp=2 --steps 3", dir.path());
  CHECK(t.find("on 2 ranks: step 3/3") != std::string::npos);
  CHECK(t.find("2 rank(s) measured, 3 step(s)") != std::string::npos);  // the report follows
  // One emulated rank, in process.
  t = on_terminal("validate " + spec + " --layout dp=2 --steps 2 --emulate-rank 1", dir.path());
  CHECK(t.find("validate rank 1 of 2: step 2/2") != std::string::npos);
  // calibrate: one line per phase.
  t = on_terminal("calibrate --quick --ranks 1 --output cal.yaml", dir.path());
  CHECK(t.find("calibrate: [1/5] bf16 GEMMs") != std::string::npos);
  CHECK(t.find("calibrate: [5/5] training steps") != std::string::npos);
  // PARAPLAN_PROGRESS=0 on a terminal, and any run whose stderr is not a terminal: no progress.
  t = on_terminal("calibrate --quick --ranks 1 --output cal.yaml", dir.path(), "PARAPLAN_PROGRESS=0");
  CHECK(t.find("[1/5]") == std::string::npos);
  Result r = run_paraplan({"validate", std::string(PARAPLAN_SOURCE_DIR) + "/configs/examples/tiny-cpu.yaml", "--layout",
                           "dp=2", "--steps", "2"},
                          dir.path());
  CHECK(r.code == 0);
  CHECK(r.err.find("step 1/2") == std::string::npos);
  CHECK(r.err.find('\r') == std::string::npos);
  r = run_paraplan({"calibrate", "--quick", "--ranks", "1", "--output", "cal.yaml"}, dir.path());
  CHECK(r.code == 0);
  CHECK(r.err.find("[1/5]") == std::string::npos);
}

TEST_CASE("paraplan models --model counts one model - mixtures of experts too - and plan takes them", "[newcomer][cli][moe]") {
  TempDir dir;
  Result r = run_paraplan({"models", "--model", "@SRC@/tests/data/hf/deepseek-v3/config.json", "--format", "json"}, dir.path());
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["parameters"] == 671026419200LL);  // worked out in test_params.cpp
  CHECK(j["active_parameters"] == 37552297472LL);
  CHECK(j["mtp_parameters"] == 11610068224LL);
  CHECK(j["moe"]["experts"] == 256);
  CHECK(j["mla"]["kv_lora_rank"] == 512);
  CHECK(j["plannable"] == true);
  r = run_paraplan({"models", "--model", "llama-3.1-8b"}, dir.path());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("Llama-3.1-8B: 8.030 B (8030261248) parameters") != std::string::npos);
  // plan takes it (issue 16): expert-parallel layouts are searched; validate refuses it (dense executors only).
  r = run_paraplan({"plan", "--model", "@SRC@/tests/data/hf/mixtral-8x7b-v0.1/config.json", "--gpus", "64", "--gpu", "h100",
                    "--top", "3"},
                   dir.path());
  CHECK(r.code == 0);
  CHECK(r.out.find("recommended: ") != std::string::npos);
  CHECK(r.out.find(",ep=") != std::string::npos);
  // The YAML model format: MoE keys need num_experts; top-k at most the experts.
  write(dir.path() / "m.yaml",
        "name: x\nnum_layers: 2\nhidden_size: 256\nnum_attention_heads: 8\nffn_hidden_size: 512\nvocab_size: 1000\n"
        "activation: swiglu\nnormalization: rmsnorm\ntie_embeddings: false\nposition_embedding: rope\nexperts_per_token: 2\n");
  r = run_paraplan({"models", "--model", "m.yaml"}, dir.path());
  CHECK(r.code == 2);
  CHECK(r.err.find("m.yaml:11: experts_per_token: applies to a mixture of experts only (num_experts > 0)") != std::string::npos);
  write(dir.path() / "m.yaml",
        "name: x\nnum_layers: 2\nhidden_size: 256\nnum_attention_heads: 8\nffn_hidden_size: 512\nvocab_size: 1000\n"
        "activation: swiglu\nnormalization: rmsnorm\ntie_embeddings: false\nposition_embedding: rope\nnum_experts: 4\n"
        "experts_per_token: 8\nmoe_ffn_hidden_size: 128\n");
  r = run_paraplan({"models", "--model", "m.yaml"}, dir.path());
  CHECK(r.code == 2);
  CHECK(r.err.find("experts_per_token: expected at most 4, got 8") != std::string::npos);
}
