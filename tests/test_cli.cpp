// CLI tests: they run the real `paraplan` binary on files written into a fresh
// temporary folder and check what a user (or a CI job) sees: the exit code,
// that bad input gives exactly one line on stderr naming the file, line and
// field ("paraplan: error: FILE[:LINE]: FIELD: message") and nothing on
// stdout, and that the JSON report is complete and self-consistent.
//
// Every test is a table of cases: a name, the files to write, the arguments,
// the expected exit code and the substrings the one error line must contain.
// In file texts, arguments and expectations, @DIR@ is the case's temporary
// folder and @SRC@ the repository root.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/stat.h>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace paraplan::test;

// ---- input files ----------------------------------------------------------------

using Files = std::map<std::string, std::string>;  // file name -> text

// A small GQA model (Mistral-7B's shape, 32 layers, 8 kv heads), an 8-GPU
// 80 GiB node, and a plan spec that fits (dp=4, tp=2, ZeRO-1). The line
// numbers of these texts are used in the expectations below.
Files base_files() {
  return {
      {"model.yaml",
       "name: test-gqa\n"                //  1
       "num_layers: 32\n"                //  2
       "hidden_size: 4096\n"             //  3
       "num_attention_heads: 32\n"       //  4
       "num_kv_heads: 8\n"               //  5
       "ffn_hidden_size: 14336\n"        //  6
       "vocab_size: 32000\n"             //  7
       "activation: swiglu\n"            //  8
       "normalization: rmsnorm\n"        //  9
       "tie_embeddings: false\n"         // 10
       "position_embedding: rope\n"},    // 11
      {"cluster.yaml",
       "name: test-node\n"               //  1
       "gpu:\n"                          //  2
       "  name: test-gpu\n"              //  3
       "  memory_gib: 80\n"              //  4
       "  peak_tflops_bf16: 989\n"       //  5
       "  hbm_bandwidth_gbs: 3350\n"     //  6
       "gpus_per_node: 8\n"              //  7
       "intra_node:\n"                   //  8
       "  bandwidth_gbs: 450\n"          //  9
       "  latency_us: 3\n"               // 10
       "inter_node:\n"                   // 11
       "  bandwidth_gbs: 50\n"           // 12
       "  latency_us: 14\n"              // 13
       "runtime_overhead_gib: 1.5\n"     // 14
       "fragmentation: 0.05\n"},         // 15
      {"spec.yaml",
       "model: model.yaml\n"             //  1
       "cluster: cluster.yaml\n"         //  2
       "num_nodes: 1\n"                  //  3
       "training:\n"                     //  4
       "  seq_length: 4096\n"            //  5
       "  global_batch_size: 512\n"      //  6
       "layout: \"tp=2,zero=1\"\n"},     //  7
  };
}

// `files` with one exact piece of text in `file` replaced (it must be there).
Files edit(Files files, const std::string& file, const std::string& from, const std::string& to) {
  std::string& text = files.at(file);
  const size_t i = text.find(from);
  if (i == std::string::npos) throw std::logic_error("test table: '" + from + "' not in " + file);
  text.replace(i, from.size(), to);
  return files;
}
Files add(Files files, const std::string& file, const std::string& text) {
  files[file] += text;
  return files;
}
Files without(Files files, const std::string& file) {
  files.erase(file);
  return files;
}
Files base_with(const std::string& file, const std::string& text) { return add(base_files(), file, text); }
Files base_edit(const std::string& file, const std::string& from, const std::string& to) {
  return edit(base_files(), file, from, to);
}

void write_files(const Files& files, const fs::path& dir) {
  for (const auto& [name, text] : files) {
    std::ofstream(dir / name, std::ios::binary) << expand(text, dir);
  }
}

std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// A plan spec for a shipped model and cluster (absolute paths into configs/).
std::string shipped_spec(const std::string& model, const std::string& cluster, int nodes, int seq,
                         int gbs) {
  return "model: @SRC@/configs/models/" + model + ".yaml\ncluster: @SRC@/configs/clusters/" +
         cluster + ".yaml\nnum_nodes: " + std::to_string(nodes) + "\ntraining:\n  seq_length: " +
         std::to_string(seq) + "\n  global_batch_size: " + std::to_string(gbs) + "\n";
}

const char* const kLlama2Example = "@SRC@/configs/examples/llama2-7b-dgx-h100.yaml";

// ---- the bad-input contract ---------------------------------------------------

struct Case {
  const char* name;
  Files files;
  std::vector<std::string> args;
  int code;
  std::vector<std::string> err_has;  // substrings of the one stderr line
};

void run_error_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    INFO("case: " << c.name);
    TempDir dir;
    write_files(c.files, dir.path());
    const std::set<std::string> before = listing(dir.path());
    const Result r = run_paraplan(c.args, dir.path());
    INFO("stdout: " << r.out);
    INFO("stderr: " << r.err);
    CHECK(r.signal == 0);  // no crash
    CHECK(r.code == c.code);
    CHECK(r.out.empty());  // nothing on stdout on error
    // Exactly one line on stderr, in the one format.
    CHECK(!r.err.empty());
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK(r.err.rfind("paraplan: error: ", 0) == 0);
    CHECK(r.err.find("terminate called") == std::string::npos);
    for (const std::string& s : c.err_has) {
      const std::string want = expand(s, dir.path());
      INFO("expected in stderr: " << want);
      CHECK(r.err.find(want) != std::string::npos);
    }
    // An error leaves no file behind.
    CHECK(listing(dir.path()) == before);
  }
}

const std::vector<std::string> kCheck = {"check", "@DIR@/spec.yaml"};
std::vector<std::string> check_with(std::vector<std::string> extra) {
  std::vector<std::string> a = kCheck;
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// ---- JSON helpers ------------------------------------------------------------

const char* const kCategories[] = {"weights",   "gradients", "optimizer", "activations",
                                   "transient", "comm",      "runtime",   "fragmentation"};

std::int64_t sum_of_categories(const json& memory) {
  std::int64_t sum = 0;
  for (const char* c : kCategories) sum += memory.at(c).get<std::int64_t>();
  return sum;
}

json parse_json(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    FAIL("stdout is not JSON: " << e.what() << "\n" << text);
  }
  return {};
}

// Runs a command on base/extra files that must succeed with JSON on stdout.
json run_json(const Files& files, const std::vector<std::string>& args, int expect_code = 0) {
  TempDir dir;
  write_files(files, dir.path());
  const Result r = run_paraplan(args, dir.path());
  INFO("stderr: " << r.err);
  REQUIRE(r.code == expect_code);
  CHECK(r.err.empty());
  return parse_json(r.out);
}

}  // namespace

// ==== bad input: one line, file, line, field; exit 2 ===========================

TEST_CASE("malformed YAML specs: one line naming file, line and field, exit 2", "[cli][errors]") {
  run_error_cases({
      {"YAML syntax error gives the line (bad indentation on line 6)",
       base_edit("spec.yaml", "  global_batch_size: 512", " global_batch_size: 512"), kCheck, 2,
       {"@DIR@/spec.yaml:6: ", "YAML syntax error"}},
      {"YAML syntax error in the model file",
       base_edit("model.yaml", "vocab_size: 32000", "vocab_size: [32000"), kCheck, 2,
       {"@DIR@/model.yaml:", "YAML syntax error"}},
      {"YAML nested 600 deep (issue 12: yaml-cpp's 'bad file')",
       base_edit("spec.yaml", "num_nodes: 1", "num_nodes: 1\nx: " + std::string(600, '[') + std::string(600, ']')),
       kCheck, 2, {"@DIR@/spec.yaml:4: ", "YAML nested more than 499 levels deep"}},
      {"duplicate key (issue 12: the first silently won)",
       base_edit("spec.yaml", "  global_batch_size: 512", "  global_batch_size: 512\n  seq_length: 8192"), kCheck, 2,
       {"@DIR@/spec.yaml:7: training.seq_length: ", "duplicate key (first given on line 5)"}},
      {"a mapping as a key (issue 12: yaml-cpp's 'bad conversion')",
       base_edit("spec.yaml", "num_nodes: 1", "num_nodes: 1\n{x: 1}: 2"), kCheck, 2,
       {"@DIR@/spec.yaml:4: (top level): ", "expected a plain key, got a mapping as a key"}},
      {"unknown model key suggests the closest (hiden_size)",
       base_edit("model.yaml", "hidden_size:", "hiden_size:"), kCheck, 2,
       {"@DIR@/model.yaml:3: hiden_size: ", "unknown key", "did you mean 'hidden_size'"}},
      {"unknown top-level key suggests the closest (trainig)",
       base_edit("spec.yaml", "training:", "trainig:"), kCheck, 2,
       {"@DIR@/spec.yaml:4: trainig: ", "unknown key", "did you mean 'training'"}},
      {"unknown nested key is dotted (search.tpp)", base_with("spec.yaml", "search:\n  tpp: [1]\n"),
       kCheck, 2, {"@DIR@/spec.yaml:9: search.tpp: ", "did you mean 'tp'"}},
      {"string for an integer", base_edit("model.yaml", "num_layers: 32", "num_layers: \"many\""),
       kCheck, 2, {"@DIR@/model.yaml:2: num_layers: ", "expected an integer", "'many'"}},
      {"fraction for an integer",
       base_edit("spec.yaml", "global_batch_size: 512", "global_batch_size: 512.5"), kCheck, 2,
       {"@DIR@/spec.yaml:6: training.global_batch_size: ", "expected an integer"}},
      {"list for a bool", base_edit("model.yaml", "tie_embeddings: false", "tie_embeddings: [true]"),
       kCheck, 2, {"@DIR@/model.yaml:10: tie_embeddings: ", "expected true or false", "a list"}},
      {"value outside a choice", base_edit("model.yaml", "activation: swiglu", "activation: relu"),
       kCheck, 2, {"@DIR@/model.yaml:8: activation: ", "gelu | swiglu", "'relu'"}},
      {"num_layers 0", base_edit("model.yaml", "num_layers: 32", "num_layers: 0"), kCheck, 2,
       {"@DIR@/model.yaml:2: num_layers: ", "expected a positive integer", "got 0"}},
      {"seq_length -4", base_edit("spec.yaml", "seq_length: 4096", "seq_length: -4"), kCheck, 2,
       {"@DIR@/spec.yaml:5: training.seq_length: ", "expected a positive integer", "got -4"}},
      {"seq_length beyond int", base_edit("spec.yaml", "seq_length: 4096", "seq_length: 3000000000"),
       kCheck, 2, {"@DIR@/spec.yaml:5: training.seq_length: ", "expected at most 4194304"}},
      // GPT-3's learned position table has 2048 rows (paper: n_ctx = 2048).
      {"seq_length past a learned position table",
       {{"spec.yaml", shipped_spec("gpt3-175b", "dgx-a100-80gb", 128, 4096, 1536)}}, kCheck, 2,
       {"@DIR@/spec.yaml:5: training.seq_length: ", "expected at most 2048", "max_position_embeddings"}},
      {"plan --seq-length past a learned position table",
       {{"spec.yaml", shipped_spec("gpt3-175b", "dgx-a100-80gb", 128, 2048, 1536)}},
       {"plan", "@DIR@/spec.yaml", "--seq-length", "4096"}, 2, {"--seq-length", "expected at most 2048"}},
      {"memory_gib 0", base_edit("cluster.yaml", "memory_gib: 80", "memory_gib: 0"), kCheck, 2,
       {"@DIR@/cluster.yaml:4: gpu.memory_gib: ", "expected a number in (0, 1048576]", "got 0"}},
      {"memory_gib 9e9 (issue 12: negative GiB)", base_edit("cluster.yaml", "memory_gib: 80", "memory_gib: 9e9"),
       kCheck, 2, {"@DIR@/cluster.yaml:4: gpu.memory_gib: ", "expected a number in (0, 1048576]", "got 9e9"}},
      {"runtime_overhead_gib 1e300 (issue 12: llround out of range)",
       base_edit("cluster.yaml", "runtime_overhead_gib: 1.5", "runtime_overhead_gib: 1e300"), kCheck, 2,
       {"@DIR@/cluster.yaml:14: runtime_overhead_gib: ", "got 1e300"}},
      {"optimizer_state_bytes 1e300 (issue 12: negative GiB)",
       base_edit("spec.yaml", "  global_batch_size: 512", "  global_batch_size: 512\n  optimizer_state_bytes: 1e300"),
       kCheck, 2, {"@DIR@/spec.yaml:7: training.optimizer_state_bytes: ", "[0, 1024]", "got 1e300"}},
      {"negative latency", base_edit("cluster.yaml", "latency_us: 3\n", "latency_us: -1\n"), kCheck, 2,
       {"@DIR@/cluster.yaml:10: intra_node.latency_us: ", "expected a number in [0, 1000000000]"}},
      {"nccl_channels 0", base_edit("cluster.yaml", "latency_us: 3\n", "latency_us: 3\n  nccl_channels: 0\n"), kCheck, 2,
       {"@DIR@/cluster.yaml:11: intra_node.nccl_channels: ", "got 0"}},
      {"nccl_channels 65", base_edit("cluster.yaml", "latency_us: 3\n", "latency_us: 3\n  nccl_channels: 65\n"), kCheck, 2,
       {"@DIR@/cluster.yaml:11: intra_node.nccl_channels: ", "got 65"}},
      {"strided_hbm_efficiency 0", base_edit("cluster.yaml", "fragmentation: 0.05", "fragmentation: 0.05\nstrided_hbm_efficiency: 0"),
       kCheck, 2, {"@DIR@/cluster.yaml:16: strided_hbm_efficiency: ", "got 0"}},
      {"flash_attention_dropout_slowdown 0.5",
       base_edit("cluster.yaml", "fragmentation: 0.05", "fragmentation: 0.05\nflash_attention_dropout_slowdown: 0.5"),
       kCheck, 2, {"@DIR@/cluster.yaml:16: flash_attention_dropout_slowdown: ", "expected a number in [1, 10], got 0.5"}},
      {"flash_attention_deterministic_slowdown x",
       base_edit("cluster.yaml", "fragmentation: 0.05", "fragmentation: 0.05\nflash_attention_deterministic_slowdown: x"),
       kCheck, 2, {"@DIR@/cluster.yaml:16: flash_attention_deterministic_slowdown: ", "expected a number, got 'x'"}},
      {"strided_hbm_efficiency 1.5", base_edit("cluster.yaml", "fragmentation: 0.05", "fragmentation: 0.05\nstrided_hbm_efficiency: 1.5"),
       kCheck, 2, {"@DIR@/cluster.yaml:16: strided_hbm_efficiency: ", "got 1.5"}},
      {"fragmentation 1", base_edit("cluster.yaml", "fragmentation: 0.05", "fragmentation: 1"),
       kCheck, 2, {"@DIR@/cluster.yaml:15: fragmentation: ", "[0, 1)", "got 1"}},
      {"fragmentation 1.5", base_edit("cluster.yaml", "fragmentation: 0.05", "fragmentation: 1.5"),
       kCheck, 2, {"@DIR@/cluster.yaml:15: fragmentation: ", "[0, 1)"}},
      {"optimizer_efficiency 0", base_edit("cluster.yaml", "fragmentation: 0.05", "fragmentation: 0.05\noptimizer_efficiency: 0"),
       kCheck, 2, {"@DIR@/cluster.yaml:16: optimizer_efficiency: ", "(0, 1]", "got 0"}},
      {"attention_efficiency 1.5", base_edit("cluster.yaml", "fragmentation: 0.05", "fragmentation: 0.05\nattention_efficiency: 1.5"),
       kCheck, 2, {"@DIR@/cluster.yaml:16: attention_efficiency: ", "(0, 1]", "got 1.5"}},
      {"memory_headroom 1", base_edit("spec.yaml", "num_nodes: 1\n", "num_nodes: 1\nmemory_headroom: 1\n"),
       kCheck, 2, {"@DIR@/spec.yaml:4: memory_headroom: ", "[0, 1)"}},
      {"missing required model key", base_edit("model.yaml", "vocab_size: 32000\n", ""), kCheck, 2,
       {"@DIR@/model.yaml", ": vocab_size: ", "missing required key"}},
      {"missing cluster section", base_edit("cluster.yaml", "intra_node:\n  bandwidth_gbs: 450\n  latency_us: 3\n", ""),
       kCheck, 2, {"@DIR@/cluster.yaml", ": intra_node: ", "missing required key"}},
      {"kv heads that do not divide the heads", base_edit("model.yaml", "num_kv_heads: 8", "num_kv_heads: 7"),
       kCheck, 2, {"@DIR@/model.yaml:5: num_kv_heads: ", "divisor of num_attention_heads 32", "got 7"}},
      {"fp16 gradients with bf16 training",
       base_edit("spec.yaml", "  global_batch_size: 512\n", "  global_batch_size: 512\n  grad_dtype: fp16\n"),
       kCheck, 2, {"@DIR@/spec.yaml:7: training.grad_dtype: "}},
      {"ZeRO stage 4 in the search space", base_with("spec.yaml", "search:\n  zero: [0, 4]\n"), kCheck,
       2, {"@DIR@/spec.yaml:9: search.zero: ", "0-3", "got 4"}},
      {"bad layout string inside the spec",
       base_edit("spec.yaml", "layout: \"tp=2,zero=1\"", "layout: \"tp=2,foo=1\""), kCheck, 2,
       {"@DIR@/spec.yaml:7: layout.foo: ", "unknown layout field 'foo'"}},
      {"empty spec file", Files{{"spec.yaml", ""}}, kCheck, 2,
       {"@DIR@/spec.yaml: ", "expected a mapping"}},
      {"spec that is a list", Files{{"spec.yaml", "- model.yaml\n"}}, kCheck, 2,
       {"@DIR@/spec.yaml:1: ", "expected a mapping", "a list"}},
  });
}

TEST_CASE("layouts that cannot run: exit 2 naming the layout field and why", "[cli][errors]") {
  const Files b = base_files();
  run_error_cases({
      {"heads not divisible by tp (12 heads, tp=8)",
       edit(edit(edit(b, "model.yaml", "num_attention_heads: 32", "num_attention_heads: 12"), "model.yaml",
                 "num_kv_heads: 8", "num_kv_heads: 12"),
            "model.yaml", "hidden_size: 4096", "hidden_size: 768"),
       check_with({"--layout", "tp=8"}), 2,
       {"@DIR@/spec.yaml: layout.tp: ", "num_attention_heads 12 is not divisible by tp 8"}},
      {"kv heads not divisible by tp (8 kv heads, tp=16 on 2 nodes, TP across nodes allowed)",
       add(b, "spec.yaml", "search:\n  allow_tp_across_nodes: true\n"),
       check_with({"--layout", "tp=16", "--nodes", "2"}), 2,
       {"@DIR@/spec.yaml: layout.tp: ", "num_kv_heads 8 is not divisible by tp 16"}},
      {"layers not divisible by pp*vpp (32 layers, pp=4, vpp=3)", b,
       check_with({"--layout", "pp=4,vpp=3"}), 2,
       {"@DIR@/spec.yaml: layout.pp: ", "num_layers 32 is not divisible by pp*vpp = 12"}},
      {"global batch not divisible by dp*mbs (512, dp=8, mbs=3)", b,
       check_with({"--layout", "dp=8,mbs=3"}), 2,
       {"@DIR@/spec.yaml: layout.mbs: ", "global_batch_size 512 is not divisible by dp*mbs = 24"}},
      {"GPU count the layout does not multiply to (dp=3, tp=2 on 8 GPUs)", b,
       check_with({"--layout", "dp=3,tp=2"}), 2,
       {"@DIR@/spec.yaml: layout.dp: ", "3*2*1 = 6 GPUs", "the spec has 8"}},
      {"tp*pp that does not divide the GPUs (tp=16 on 8)", b, check_with({"--layout", "tp=16"}), 2,
       {"@DIR@/spec.yaml: layout.tp: ", "does not divide the 8 GPUs"}},
      {"vpp without pipeline parallelism", b, check_with({"--layout", "pp=1,vpp=2"}), 2,
       {"@DIR@/spec.yaml: layout.vpp: ", "needs pp > 1"}},
      {"sequence parallelism with a sequence not divisible by tp",
       edit(b, "spec.yaml", "seq_length: 4096", "seq_length: 4097"), check_with({"--layout", "tp=2,sp=1"}), 2,
       {"@DIR@/spec.yaml: layout.sp: ", "seq_length 4097 divisible by tp 2"}},
      {"interleaved schedule with 2 micro-batches on pp=4 (dp=2, mbs=128)",
       b, check_with({"--layout", "pp=4,vpp=2,mbs=128"}), 2,
       {"@DIR@/spec.yaml: layout.vpp: ", "micro-batches (2) divisible by pp 4"}},
      {"a ZeRO stage the framework lacks (nanotron, zero=2)", b,
       check_with({"--layout", "tp=2,zero=2", "--framework", "nanotron"}), 2,
       {"@DIR@/spec.yaml: layout.zero: ", "framework nanotron", "zero=0 or zero=1"}},
      {"a recompute policy the framework lacks (deepspeed, selective)", b,
       check_with({"--layout", "tp=1,zero=1,recompute=selective", "--framework", "deepspeed"}), 2,
       {"@DIR@/spec.yaml: layout.recompute: ", "framework deepspeed"}},
      {"torchtitan's per-op selective AC where it is not modelled (fsdp, tp=2)", b,
       check_with({"--layout", "tp=2,zero=3,recompute=selective", "--framework", "fsdp"}), 2,
       {"@DIR@/spec.yaml: layout.recompute: ", "framework fsdp", "per-op selective AC"}},
      {"unknown --framework", b, check_with({"--framework", "bogus"}), 2,
       {"--framework: ", "expected megatron, deepspeed, fsdp, nanotron or paraplan, got 'bogus'"}},
      {"unknown training.framework in the spec",
       edit(b, "spec.yaml", "  global_batch_size: 512", "  global_batch_size: 512\n  framework: megatronn"), kCheck, 2,
       {"@DIR@/spec.yaml:7: training.framework: ", "megatron | deepspeed | fsdp | nanotron | paraplan"}},
      {"unknown training.transformer_impl in the spec",
       edit(b, "spec.yaml", "  global_batch_size: 512", "  global_batch_size: 512\n  transformer_impl: te"), kCheck, 2,
       {"@DIR@/spec.yaml:7: training.transformer_impl: ", "transformer_engine | local"}},
      {"training.mtp on a model without multi-token-prediction modules",
       edit(b, "spec.yaml", "  global_batch_size: 512", "  global_batch_size: 512\n  mtp: true"), kCheck, 2,
       {"@DIR@/spec.yaml:7: training.mtp: ", "no multi-token-prediction modules (mtp_layers: 0)"}},
      {"microbatch_group without interleaving", b, check_with({"--layout", "tp=2,pp=2,microbatch_group=2"}), 2,
       {"@DIR@/spec.yaml: layout.microbatch_group: ", "interleaved schedule"}},
  });
}

TEST_CASE("malformed --layout strings", "[cli][errors][layout]") {
  const Files b = base_files();
  run_error_cases({
      {"unknown field", b, check_with({"--layout", "tp=2,foo=1"}), 2,
       {"--layout: layout.foo: ", "unknown layout field 'foo'", "known: dp, tp, cp, pp"}},
      {"zero=5", b, check_with({"--layout", "zero=5"}), 2, {"--layout: layout.zero: ", "0-3", "got 5"}},
      // Issue 46: the last of two values was taken in silence, so the verdict depended on the order.
      {"a field given twice", b, check_with({"--layout", "tp=2,dp=4,tp=4"}), 2,
       {"--layout: layout.tp: ", "given twice ('tp=2' and 'tp=4'); give each field once"}},
      {"recompute=partial", b, check_with({"--layout", "recompute=partial"}), 2,
       {"--layout: layout.recompute: ", "none, selective or full", "'partial'"}},
      {"tp=0", b, check_with({"--layout", "tp=0"}), 2, {"--layout: layout.tp: ", "expected an integer >= 1"}},
      {"tp=two", b, check_with({"--layout", "tp=two"}), 2, {"--layout: layout.tp: ", "expected an integer"}},
      {"empty value", b, check_with({"--layout", "tp=2,dp="}), 2, {"--layout: layout.dp: "}},
      {"no '='", b, check_with({"--layout", "tp"}), 2, {"--layout: layout.tp: ", "expected key=value"}},
      {"sp=2", b, check_with({"--layout", "tp=2,sp=2"}), 2, {"--layout: layout.sp: ", "expected 0 or 1"}},
      {"schedule=zigzag", b, check_with({"--layout", "schedule=zigzag"}), 2,
       {"--layout: layout.schedule: ", "1f1b, interleaved or gpipe"}},
      {"schedule=interleaved without vpp", b, check_with({"--layout", "schedule=interleaved"}), 2,
       {"--layout: layout.schedule: ", "needs vpp > 1"}},
      // Issue 12 reproducers: these crashed with SIGFPE (products overflowing int).
      {"tp=65536,pp=65536 (tp*pp overflowed to 0)", b, check_with({"--layout", "tp=65536,pp=65536"}), 2,
       {"@DIR@/spec.yaml: layout.tp: ", "tp*pp = 4294967296 does not divide the 8 GPUs"}},
      {"mbs=536870912 (dp*mbs overflowed)", b, check_with({"--layout", "tp=1,mbs=536870912"}), 2,
       {"--layout: layout.mbs: ", "expected at most 16777216, got 536870912"}},
      {"a number past 64 bits", b, check_with({"--layout", "dp=99999999999999999999999"}), 2,
       {"--layout: layout.dp: ", "expected at most 16777216"}},
      {"dp, tp and pp at their caps", b, check_with({"--layout", "dp=16777216,tp=16777216,pp=16777216"}), 2,
       {"@DIR@/spec.yaml: layout.dp: ", "= more than 2^62 GPUs, but the spec has 8"}},
  });
}

TEST_CASE("malformed --megatron-args", "[cli][errors][megatron]") {
  const Files b = base_files();
  run_error_cases({
      // Issue 46: config fields Megatron-LM's parser excludes (arguments.py:2307-2349) were accepted as flags.
      {"a TransformerConfig field that is no flag", b,
       check_with({"--megatron-args", "--pipeline-model-parallel-size 2 --virtual-pipeline-model-parallel-size 2"}), 2,
       {"--megatron-args: --virtual-pipeline-model-parallel-size: ", "not a command-line flag of Megatron-LM@d98e8a64",
        "use --num-virtual-stages-per-pipeline-rank"}},
      {"--cpu-offloading", b, check_with({"--megatron-args", "--cpu-offloading"}), 2,
       {"--megatron-args: --cpu-offloading: ", "a TransformerConfig field its parser excludes"}},
      {"non-integer size", b, check_with({"--megatron-args", "--tensor-model-parallel-size two"}), 2,
       {"--megatron-args: --tensor-model-parallel-size: ", "expected a positive integer", "'two'"}},
      {"zero size", b, check_with({"--megatron-args", "--pipeline-model-parallel-size 0"}), 2,
       {"--megatron-args: --pipeline-model-parallel-size: ", "expected a positive integer"}},
      {"flag without its value", b, check_with({"--megatron-args", "--micro-batch-size"}), 2,
       {"--megatron-args: --micro-batch-size: ", "expected a value"}},
      {"--tp-comm-overlap without --sequence-parallel (Megatron asserts it)", b,
       check_with({"--megatron-args", "--tensor-model-parallel-size 2 --tp-comm-overlap"}), 2,
       {"--megatron-args: --tp-comm-overlap: ", "needs --sequence-parallel"}},
      {"model shape mismatch: --num-layers 80 for a 32-layer model", b,
       check_with({"--megatron-args", "--num-layers 80 --tensor-model-parallel-size 2"}), 2,
       {"--megatron-args: --num-layers: ", "is 80 but the model's num_layers is 32"}},
      {"model shape mismatch: --num-query-groups", b,
       check_with({"--megatron-args", "--num-query-groups 4"}), 2,
       {"--megatron-args: --num-query-groups: ", "num_kv_heads is 8"}},
      {"unknown recompute granularity", b,
       check_with({"--megatron-args", "--recompute-granularity partial"}), 2,
       {"--megatron-args: --recompute-granularity: ", "full or selective"}},
      {"context parallelism without flash attention", b,
       check_with({"--megatron-args", "--context-parallel-size 2 --attention-backend unfused"}), 2,
       {"layout.cp: ", "flash / fused attention"}},
      {"layers per virtual stage that do not divide a stage", b,
       check_with({"--megatron-args",
                   "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 5"}),
       2, {"--megatron-args: --num-layers-per-virtual-pipeline-stage: ", "16 layers per pipeline stage"}},
      {"conflicts with --layout", b,
       check_with({"--layout", "tp=2", "--megatron-args", "--tensor-model-parallel-size 4"}), 2,
       {"--megatron-args: tp: ", "conflicts with --layout", "2 vs 4"}},
      // Issue 12 reproducers (SIGFPE before): a huge micro-batch, and more stages than layers
      // with one layer per virtual stage (vpp became 0).
      {"--micro-batch-size 536870912", b, check_with({"--megatron-args", "--micro-batch-size 536870912"}), 2,
       {"--megatron-args: --micro-batch-size: ", "expected at most 16777216"}},
      // Issue 14: a typo in a layout flag is an error naming it, with the flag meant.
      {"typo in a parallelism flag", b, check_with({"--megatron-args", "--tensor-model-paralel-size 2"}), 2,
       {"--megatron-args: --tensor-model-paralel-size: ", "unknown flag", "did you mean --tensor-model-parallel-size?"}},
      {"a parallelism flag Megatron does not have", b, check_with({"--megatron-args", "--tensor-parallel-size 2"}), 2,
       {"--megatron-args: --tensor-parallel-size: ", "did you mean --tensor-model-parallel-size?"}},
      {"extended batch flag", b, check_with({"--megatron-args", "--micro-batch-sizes 2"}), 2,
       {"--megatron-args: --micro-batch-sizes: ", "did you mean --micro-batch-size?"}},
      {"full recompute without a method", b, check_with({"--megatron-args", "--recompute-granularity full"}), 2,
       {"--megatron-args: --recompute-method: ", "needs --recompute-method uniform|block"}},
      {"the 2021 method flag with selective recompute names that flag", b,
       check_with({"--megatron-args", "--activations-checkpoint-method uniform --recompute-granularity selective"}), 2,
       {"--megatron-args: --activations-checkpoint-method: ", "applies to --recompute-granularity full only"}},
      {"a 2021 checkpoint layer count alone names its flag", b,
       check_with({"--megatron-args", "--activations-checkpoint-num-layers 2"}), 2,
       {"--megatron-args: --activations-checkpoint-num-layers: ", "applies to --recompute-granularity full only"}},
      {"a recompute module that is not modelled", b,
       check_with({"--megatron-args", "--recompute-granularity selective --recompute-modules core_attn mlp"}), 2,
       {"--megatron-args: --recompute-modules: ", "only core_attn (the default) is modelled, got 'mlp'"}},
      {"an architecture flag the model does not have", b, check_with({"--megatron-args", "--normalization LayerNorm"}),
       2, {"--megatron-args: --normalization: ", "is LayerNorm but the model's normalization is rmsnorm"}},
      {"pp 64 on 32 layers with one layer per virtual stage", b,
       check_with({"--megatron-args", "--pipeline-model-parallel-size 64 --num-layers-per-virtual-pipeline-stage 1"}),
       2, {"--megatron-args: --pipeline-model-parallel-size: ", "at most the model's 32 layers, got 64"}},
  });
}

TEST_CASE("check -v lists the Megatron flags paraplan does not read - a real flag is never an error", "[cli][megatron]") {
  TempDir dir;
  const Result r = run_paraplan({"check", kLlama2Example, "-v", "--megatron-args",
                                 "--tensor-model-parallel-size 2 --lr 3e-4 --log-interval 10 --expert-tensor-parallel-size 1 "
                                 "--num-layers-at-start-in-bf16 1 --made-up-flag 3"},
                                dir.path());
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("not read") != std::string::npos);
  for (const char* f : {"--lr", "--log-interval", "--expert-tensor-parallel-size", "--num-layers-at-start-in-bf16",
                        "--made-up-flag (unknown to Megatron-LM@d98e8a64)"})
    CHECK(r.err.find(f) != std::string::npos);
  // Without -v nothing is printed for them.
  const Result q =
      run_paraplan({"check", kLlama2Example, "--megatron-args", "--tensor-model-parallel-size 2 --lr 3e-4"}, dir.path());
  CHECK(q.code == 0);
  CHECK(q.err.empty());
}

TEST_CASE("explain and check take --seq-length and --global-batch-size, as Megatron's flags do", "[cli]") {
  TempDir dir;
  const std::string spec = "@SRC@/configs/examples/llama3.1-405b-h100.yaml";
  const Result a = run_paraplan({"check", spec, "--format", "json", "--seq-length", "131072", "--global-batch-size",
                                 "128", "--layout", "tp=8,cp=16,pp=16,sp=1,zero=1,recompute=full,mbs=1,first_stage_layers=7,last_stage_layers=7"},
                                dir.path());
  const Result b = run_paraplan({"check", spec, "--format", "json", "--layout", "tp=8,cp=16,pp=16,sp=1,zero=1,recompute=full,mbs=1,first_stage_layers=7,last_stage_layers=7",
                                 "--megatron-args", "--seq-length 131072 --global-batch-size 128 --overlap-grad-reduce --overlap-param-gather "
                                 "--attention-dropout 0 --hidden-dropout 0"},  // the model has none; Megatron's default is 0.1
                                dir.path());
  INFO(a.err << b.err);
  REQUIRE(a.code == 0);
  REQUIRE(b.code == 0);
  CHECK(json::parse(a.out) == json::parse(b.out));
  CHECK(json::parse(a.out).at("time").at("microbatches") == 16);  // 128 / dp 8
}

TEST_CASE("FP8 on a GPU without FP8 is refused, naming the flag or key (issue 14)", "[cli][errors][fp8]") {
  TempDir dir;
  const Result r = run_paraplan({"check", "@SRC@/configs/examples/mistral-7b-a100.yaml", "--megatron-args",
                                 "--tensor-model-parallel-size 2 --fp8-format hybrid"},
                                dir.path());
  CHECK(r.code == 2);
  CHECK(r.err.find("--megatron-args: --fp8-format: GPU A100") != std::string::npos);
  CHECK(r.err.find("has no FP8 peak") != std::string::npos);
  // On H100 the same flags are read: FP8 is on.
  const Result h = run_paraplan({"check", kLlama2Example, "--format", "json", "--megatron-args",
                                 "--tensor-model-parallel-size 2 --fp8-format hybrid --fp8-param-gather"},
                                dir.path());
  INFO(h.err);
  CHECK(h.code == 0);
  const Result b = run_paraplan({"check", kLlama2Example, "--format", "json", "--megatron-args",
                                 "--tensor-model-parallel-size 2"},
                                dir.path());
  CHECK(b.code == 0);
  // FP8 primary weights cost what bf16 weights cost; the 1-byte saved linear
  // inputs make the FP8 run's peak smaller, and its step shorter.
  const json jh = json::parse(h.out), jb = json::parse(b.out);
  CHECK(jh.at("peak_memory_bytes").get<std::int64_t>() < jb.at("peak_memory_bytes").get<std::int64_t>());
  CHECK(jh.at("time").at("step_s").get<double>() < jb.at("time").at("step_s").get<double>());
}

TEST_CASE("malformed or missing DeepSpeed configs", "[cli][errors][deepspeed]") {
  const auto ds = [](const std::string& text) { return base_with("ds.json", text); };
  const std::vector<std::string> args = check_with({"--deepspeed-config", "@DIR@/ds.json"});
  run_error_cases({
      {"JSON syntax error", ds("{\"zero_optimization\": {\"stage\": 3,}\n"), args, 2,
       {"@DIR@/ds.json:1: ", "JSON syntax error"}},
      {"missing file", base_files(), args, 2, {"@DIR@/ds.json: --deepspeed-config: ", "cannot read"}},
      {"not an object", ds("[1, 2]\n"), args, 2, {"@DIR@/ds.json: ", "expected a JSON object"}},
      {"stage as a string", ds("{\"zero_optimization\": {\"stage\": \"3\"}}\n"), args, 2,
       {"@DIR@/ds.json: zero_optimization.stage: ", "expected an integer >= 0"}},
      {"stage 4", ds("{\"zero_optimization\": {\"stage\": 4}}\n"), args, 2,
       {"@DIR@/ds.json: zero_optimization.stage: ", "0-3"}},
      // Issue 46: the last of two values was taken in silence.
      {"reduce_bucket_size 0 (allowed by DeepSpeed's schema, not expressible here)",
       ds("{\"zero_optimization\": {\"stage\": 2, \"reduce_bucket_size\": 0}}\n"), args, 2,
       {"@DIR@/ds.json: zero_optimization.reduce_bucket_size: ", "0 (one reduction per gradient tensor) is not modelled"}},
      {"a key given twice", ds("{\"zero_optimization\": {\"stage\": 1, \"stage\": 3}}\n"), args, 2,
       {"@DIR@/ds.json: zero_optimization.stage: ", "key given twice in one object"}},
      {"micro batch 0", ds("{\"train_micro_batch_size_per_gpu\": 0}\n"), args, 2,
       {"@DIR@/ds.json: train_micro_batch_size_per_gpu: ", "expected a positive integer"}},
      {"gradient_accumulation_steps 2e9 (the derived global batch overflowed int)",
       ds("{\"train_micro_batch_size_per_gpu\": 1, \"gradient_accumulation_steps\": 2000000000}\n"), args, 2,
       {"@DIR@/ds.json: gradient_accumulation_steps: ", "expected at most 16777216"}},
      {"a number past double's range (issue 12: raw nlohmann message)",
       ds("{\n  \"train_micro_batch_size_per_gpu\": 1e400\n}\n"), args, 2,
       {"@DIR@/ds.json:2: train_micro_batch_size_per_gpu: ", "within double's range, got 1e400"}},
      {"bf16.enabled as a number (issue 12: raw nlohmann type_error)", ds("{\"bf16\": {\"enabled\": 1}}\n"), args, 2,
       {"@DIR@/ds.json: bf16.enabled: ", "expected true, false or \"auto\", got 1"}},
      {"offload device as a number (issue 12)",
       ds("{\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": 0}}}\n"), args, 2,
       {"@DIR@/ds.json: zero_optimization.offload_optimizer.device: ", "expected a string"}},
      {"micro batch 536870912", ds("{\"train_micro_batch_size_per_gpu\": 536870912}\n"), args, 2,
       {"@DIR@/ds.json: train_micro_batch_size_per_gpu: ", "expected at most 16777216"}},
      {"optimizer offload is not modelled",
       ds("{\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\"}}}\n"), args, 2,
       {"@DIR@/ds.json: zero_optimization.offload_optimizer: ", "offload is not modelled"}},
  });
}

TEST_CASE("HuggingFace config.json models: missing keys and MoE are errors", "[cli][errors][hf]") {
  const std::string llama =
      "{\n"
      "  \"hidden_act\": \"silu\",\n"
      "  \"hidden_size\": 4096,\n"
      "  \"intermediate_size\": 11008,\n"
      "  \"max_position_embeddings\": 4096,\n"
      "  \"model_type\": \"llama\",\n"
      "  \"num_attention_heads\": 32,\n"
      "  \"num_hidden_layers\": 32,\n"
      "  \"num_key_value_heads\": 32,\n"
      "  \"rms_norm_eps\": 1e-05,\n"
      "  \"tie_word_embeddings\": false,\n"
      "  \"vocab_size\": 32000\n"
      "}\n";
  const auto hf = [](const std::string& config) {
    Files f = base_edit("spec.yaml", "model: model.yaml", "model: config.json");
    f["config.json"] = config;
    return f;
  };
  run_error_cases({
      {"missing num_hidden_layers", hf(replace_all(llama, "  \"num_hidden_layers\": 32,\n", "")), kCheck, 2,
       {"@DIR@/config.json: num_hidden_layers: ", "missing required key"}},
      {"string for an integer", hf(replace_all(llama, "\"hidden_size\": 4096", "\"hidden_size\": \"4096\"")),
       kCheck, 2, {"@DIR@/config.json: hidden_size: ", "expected a positive integer"}},
      {"unknown activation", hf(replace_all(llama, "\"silu\"", "\"relu\"")), kCheck, 2,
       {"@DIR@/config.json: hidden_act: ", "relu"}},
      // Qwen3-MoE names its experts num_experts; a config with only the model type is refused too.
      {"an MoE model type alone is rejected",
       hf(replace_all(llama, "\"model_type\": \"llama\"", "\"model_type\": \"olmoe\"")), kCheck, 2,
       {"@DIR@/config.json: model_type: ", "mixture-of-experts", "olmoe", "qwen2_moe and qwen3_moe only"}},
      {"Qwen3-MoE without its expert keys",
       hf(replace_all(llama, "\"model_type\": \"llama\"", "\"model_type\": \"qwen3_moe\"")), kCheck, 2,
       {"@DIR@/config.json: num_experts: "}},
      {"multi-latent attention alone is rejected",
       hf(replace_all(llama, "\"model_type\": \"llama\",", "\"model_type\": \"llama\", \"kv_lora_rank\": 512,")),
       kCheck, 2, {"@DIR@/config.json: kv_lora_rank: ", "multi-latent attention"}},
      {"JSON syntax error", hf("{\n  \"hidden_size\": 4096,\n  oops\n}\n"), kCheck, 2,
       {"@DIR@/config.json:3: ", "JSON syntax error"}},
      {"a number past double's range (issue 12)", hf(replace_all(llama, "\"hidden_size\": 4096", "\"hidden_size\": 1e400")),
       kCheck, 2, {"@DIR@/config.json:", ": hidden_size: ", "within double's range, got 1e400"}},
  });
}

TEST_CASE("missing files, no layout and command-line misuse", "[cli][errors]") {
  run_error_cases({
      {"missing spec file", Files{}, kCheck, 2, {"@DIR@/spec.yaml: ", "cannot read file"}},
      {"missing model file referenced by the spec", without(base_files(), "model.yaml"), kCheck, 2,
       {"@DIR@/spec.yaml:1: model: ", "file not found", "@DIR@/model.yaml"}},
      {"missing cluster file referenced by the spec", without(base_files(), "cluster.yaml"), kCheck, 2,
       {"@DIR@/spec.yaml:2: cluster: ", "file not found", "@DIR@/cluster.yaml"}},
      {"no layout given at all", base_edit("spec.yaml", "layout: \"tp=2,zero=1\"\n", ""), kCheck, 2,
       {"@DIR@/spec.yaml: layout: ", "no layout given", "--layout"}},
      {"no layout given to explain", base_edit("spec.yaml", "layout: \"tp=2,zero=1\"\n", ""),
       {"explain", "@DIR@/spec.yaml"}, 2, {"@DIR@/spec.yaml: layout: ", "no layout given"}},
      {"--stage beyond the pipeline", base_files(), {"explain", "@DIR@/spec.yaml", "--stage", "2"}, 2,
       {"--stage: ", "below pp 1"}},
      {"unknown --format", base_files(), check_with({"--format", "xml"}), 2, {"--format", "xml"}},
      {"--nodes 0", base_files(), check_with({"--nodes", "0"}), 2, {"--nodes"}},
      {"unknown option", base_files(), check_with({"--bogus"}), 2, {"--bogus"}},
      {"no subcommand", base_files(), {}, 2, {"subcommand"}},
      // Issue 46: an unknown one was "A subcommand is required".
      {"unknown subcommand", base_files(), {"sweep", "x.yaml"}, 2,
       {"unknown subcommand 'sweep'; expected one of: explain, check, plan, models, gpus"}},
  });
}

// ==== check: exit codes and the verdict =======================================

TEST_CASE("special and huge input files: refused at once, one line, exit 2", "[cli][errors][files]") {
  // Issue 12: a FIFO blocked forever; /dev/zero was read until 2 GB were
  // allocated; control bytes reached the terminal.
  TempDir dir;
  write_files(base_files(), dir.path());
  REQUIRE(::mkfifo((dir.path() / "fifo.yaml").c_str(), 0600) == 0);
  std::ofstream(dir.path() / "big.yaml") << std::string(17 << 20, '#');
  std::ofstream(dir.path() / "ctl.yaml") << "model: model.yaml\ncluster: cluster.yaml\nnum_nodes: 1\n"
                                            "training: {seq_length: 8, global_batch_size: 8}\n\"bad\\x01\\x1b[2Jkey\": 3\n";
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  for (const Case& c : {Case{{"check", "fifo.yaml", "--layout", "tp=1"}, "fifo.yaml: is a FIFO; expected a regular"},
                        Case{{"check", "/dev/zero", "--layout", "tp=1"}, "/dev/zero: is a device or special file"},
                        Case{{"check", "spec.yaml", "--deepspeed-config", "/dev/urandom"},
                             "/dev/urandom: --deepspeed-config: is a device or special file"},
                        Case{{"check", "big.yaml", "--layout", "tp=1"}, "big.yaml: larger than 16 MiB"},
                        Case{{"check", "ctl.yaml", "--layout", "tp=1"}, "ctl.yaml:5: bad\\x01\\x1b[2Jkey: unknown key"}}) {
    const Result r = run_paraplan(c.args, dir.path());
    INFO(c.args[1] << ": " << r.err);
    CHECK(r.code == 2);
    CHECK(r.signal == 0);
    CHECK(r.out.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find(c.expect) != std::string::npos);
    for (char ch : r.err) CHECK((ch == '\n' || (unsigned char)ch >= 0x20));
  }
}

TEST_CASE("check: exit 0 and silent when the layout fits, 1 and one line when not", "[cli][check]") {
  SECTION("fits: exit 0, nothing printed") {
    TempDir dir;
    write_files(base_files(), dir.path());
    const Result r = run_paraplan(kCheck, dir.path());
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.out.empty());
    CHECK(r.err.empty());
  }
  SECTION("fits, -v: one 'fits:' line on stdout") {
    TempDir dir;
    write_files(base_files(), dir.path());
    const Result r = run_paraplan(check_with({"-v"}), dir.path());
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.out.rfind("fits: dp=4,tp=2,pp=1,", 0) == 0);
    CHECK(r.out.find('\n') == r.out.size() - 1);
    CHECK(r.err.empty());
  }
  SECTION("the shipped example (Llama-2-7B, NeMo recipe layout) fits") {
    TempDir dir;
    const Result r = run_paraplan({"check", kLlama2Example}, dir.path());
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.out.empty());
    CHECK(r.err.empty());
  }
  SECTION("Llama-3.1-70B with dp=8, tp=1 on one DGX H100: exit 1, one line naming the optimizer") {
    // 70.55e9 params x 16 B/param of model state alone is 1,051 GiB per GPU.
    TempDir dir;
    write_files({{"spec.yaml", shipped_spec("llama-3.1-70b", "dgx-h100", 1, 8192, 512)}}, dir.path());
    const Result r = run_paraplan(check_with({"--layout", "dp=8,tp=1"}), dir.path());
    INFO(r.out << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.empty());
    CHECK(r.out.rfind("does not fit: dp=8,tp=1,pp=1,", 0) == 0);
    CHECK(r.out.find('\n') == r.out.size() - 1);
    CHECK(r.out.find("largest term optimizer") != std::string::npos);
  }
  SECTION("does not fit, --format json: exit 1 with fits false and a negative margin") {
    const json j = run_json({{"spec.yaml", shipped_spec("llama-3.1-70b", "dgx-h100", 1, 8192, 512)}},
                            check_with({"--layout", "dp=8,tp=1", "--format", "json"}), 1);
    CHECK(j.at("fits") == false);
    CHECK(j.at("margin_bytes").get<std::int64_t>() < 0);
  }
}

// ==== JSON output ================================================================

TEST_CASE("check and explain --format json: schema and self-consistency (Llama-2-7B example)", "[cli][json]") {
  for (const char* command : {"check", "explain"}) {
    INFO(command);
    const json j = run_json({}, {command, kLlama2Example, "--format", "json"});
    for (const char* key : {"layout", "fits", "gpu_memory_bytes", "peak_memory_bytes", "headroom_bytes",
                            "usable_memory_bytes", "margin_bytes", "heaviest_stage", "heaviest_rank",
                            "memory", "stages", "params", "model", "cluster", "num_gpus",
                            "num_microbatches"}) {
      INFO("key " << key);
      CHECK(j.contains(key));
    }
    CHECK(j.at("layout") == "dp=4,tp=2,pp=1,vpp=1,sp=0,zero=1,recompute=none,mbs=1,schedule=1f1b");
    CHECK(j.at("model") == "Llama-2-7B");
    CHECK(j.at("num_gpus") == 8);
    CHECK(j.at("num_microbatches") == 512 / 4);
    // FACTS.md: Llama-2-7B has 6,738,415,616 weights; tp=2 halves each layer.
    CHECK(j.at("params").at("total") == 6'738'415'616LL);
    CHECK(j.at("params").at("per_rank").get<std::int64_t>() < 6'738'415'616LL / 2 + 300'000'000);
    // Memory: the 8 categories, total = their sum = peak = device bytes,
    // plus allocated (no runtime outside the allocator, no slack) and
    // reserved (allocated + slack).
    const json& mem = j.at("memory");
    CHECK(mem.size() == 14);
    // No sequence parallelism: no blocks held for the NCCL stream, no allocator flush.
    CHECK(mem.at("held_wanted_bytes") == 0);
    CHECK(j.at("with_held_bytes") == j.at("device_bytes"));
    CHECK(j.at("flush_risk") == false);
    CHECK(mem.at("total").get<std::int64_t>() == sum_of_categories(mem));
    CHECK(mem.at("total") == j.at("peak_memory_bytes"));
    CHECK(j.at("device_bytes") == j.at("peak_memory_bytes"));
    CHECK(mem.at("device_bytes") == j.at("device_bytes"));
    CHECK(j.at("reserved_bytes").get<std::int64_t>() ==
          j.at("allocated_bytes").get<std::int64_t>() + mem.at("fragmentation").get<std::int64_t>());
    CHECK(j.at("allocated_bytes").get<std::int64_t>() < j.at("reserved_bytes").get<std::int64_t>());
    CHECK(j.at("reserved_bytes").get<std::int64_t>() < j.at("device_bytes").get<std::int64_t>());
    // Stages: one per pipeline stage, heaviest is the peak.
    const json& stages = j.at("stages");
    REQUIRE(stages.is_array());
    REQUIRE(stages.size() == 1);
    std::int64_t max_total = 0;
    for (size_t i = 0; i < stages.size(); ++i) {
      CHECK(stages[i].at("stage") == i);
      const json& m = stages[i].at("memory");
      CHECK(m.at("total").get<std::int64_t>() == sum_of_categories(m));
      max_total = std::max(max_total, m.at("total").get<std::int64_t>());
    }
    CHECK(max_total == j.at("peak_memory_bytes").get<std::int64_t>());
    // GPU memory bookkeeping: 79.65 GiB, 5 % headroom kept free.
    const auto gpu = j.at("gpu_memory_bytes").get<std::int64_t>();
    CHECK(gpu == std::llround(79.65 * 1024 * 1024 * 1024));
    CHECK(j.at("headroom_bytes").get<std::int64_t>() == std::llround(0.05 * double(gpu)));
    CHECK(j.at("usable_memory_bytes").get<std::int64_t>() == gpu - j.at("headroom_bytes").get<std::int64_t>());
    CHECK(j.at("margin_bytes").get<std::int64_t>() ==
          j.at("usable_memory_bytes").get<std::int64_t>() - j.at("peak_memory_bytes").get<std::int64_t>());
    CHECK(j.at("fits") == (j.at("margin_bytes").get<std::int64_t>() >= 0));
    CHECK(j.at("fits") == true);
  }
}

TEST_CASE("JSON of a pipelined layout: one entry per stage, heaviest named", "[cli][json]") {
  const json j = run_json({}, {"check", kLlama2Example, "--format", "json", "--layout", "tp=2,pp=4,vpp=2"});
  const json& stages = j.at("stages");
  REQUIRE(stages.size() == 4);
  std::int64_t max_total = 0;
  int argmax = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const json& m = stages[i].at("memory");
    CHECK(stages[i].at("stage") == i);
    CHECK(m.at("total").get<std::int64_t>() == sum_of_categories(m));
    if (m.at("total").get<std::int64_t>() > max_total)
      max_total = m.at("total").get<std::int64_t>(), argmax = int(i);
  }
  CHECK(j.at("heaviest_stage") == argmax);
  CHECK(j.at("peak_memory_bytes") == max_total);
  CHECK(j.at("memory") == stages[size_t(argmax)].at("memory"));
  CHECK(j.at("layout") == "dp=1,tp=2,pp=4,vpp=2,sp=0,zero=0,recompute=none,mbs=1,schedule=1f1b");
}

TEST_CASE("explain --formulas --format json: the terms add up to the stage", "[cli][json][explain]") {
  const json j = run_json({}, {"explain", kLlama2Example, "--format", "json", "--formulas", "--layout",
                               "tp=2,pp=2,zero=1", "--stage", "1"});
  REQUIRE(j.contains("terms"));
  CHECK(j.at("terms").at("stage") == 1);
  std::int64_t sum = 0;
  std::map<std::string, std::int64_t> by_category;
  for (const json& t : j.at("terms").at("items")) {
    CHECK(t.contains("term"));
    CHECK(!t.at("formula").get<std::string>().empty());
    sum += t.at("bytes").get<std::int64_t>();
    by_category[t.at("category")] += t.at("bytes").get<std::int64_t>();
  }
  const json& stage1 = j.at("stages").at(1).at("memory");
  CHECK(sum == stage1.at("total").get<std::int64_t>());
  for (const char* c : kCategories) {
    INFO(c);
    CHECK(by_category[c] == stage1.at(c).get<std::int64_t>());
  }
}

// ==== layout sources agree ======================================================

TEST_CASE("a Megatron command line without the dropout flags trains with Megatron's dropout 0.1, and says so",
          "[cli][megatron]") {
  // NVIDIA/Megatron-LM@d98e8a64 transformer_config.py:188, 191: hidden_dropout = attention_dropout = 0.1. The
  // example's model (Llama-2-7B, seq 4096) has none; a line without the flags launches a run with dropout.
  TempDir dir;
  const std::string line = "--tensor-model-parallel-size 2 --micro-batch-size 1";
  const Result with = run_paraplan({"explain", kLlama2Example, "--formulas", "--megatron-args", line}, dir.path());
  REQUIRE(with.code == 0);
  CHECK_THAT(with.out, Catch::Matchers::Contains("attention_dropout 0.1 (Megatron-LM's default without --attention-dropout"));
  CHECK_THAT(with.out, Catch::Matchers::Contains("hidden_dropout 0.1 (Megatron-LM's default without --hidden-dropout"));
  // The embedding's dropout mask, 1 byte per element of [s, b, h]: 4096 x 1 x 4096 B = 16 MiB = 0.016 GiB.
  CHECK_THAT(with.out, Catch::Matchers::Contains("embedding dropout masks              1 in flight x 16.0 MiB = 0.016 GiB"));
  const Result without = run_paraplan({"explain", kLlama2Example, "--megatron-args",
                                       line + " --attention-dropout 0 --hidden-dropout 0"}, dir.path());
  REQUIRE(without.code == 0);
  CHECK_THAT(without.out, !Catch::Matchers::Contains("dropout masks") && !Catch::Matchers::Contains("Megatron-LM's default"));
  const json j = run_json({}, {"check", kLlama2Example, "--format", "json", "--megatron-args", line});
  CHECK(j.at("defaults").at("framework_defaults").size() == 2);
  // Out of range: a one-line error naming the flag.
  const Result bad = run_paraplan({"check", kLlama2Example, "--megatron-args", line + " --hidden-dropout 1.5"}, dir.path());
  CHECK(bad.code == 2);
  CHECK_THAT(bad.err, Catch::Matchers::Contains("--hidden-dropout: expected a probability in [0, 1), got '1.5'"));
  // --emit megatron writes the model's dropout, so the emitted line launches the run predicted.
  const Result e = run_paraplan({"explain", kLlama2Example, "--layout", "tp=2,mbs=1", "--emit", "megatron"}, dir.path());
  REQUIRE(e.code == 0);
  CHECK_THAT(e.out, Catch::Matchers::Contains("--attention-dropout 0 --hidden-dropout 0"));
  // and the environment Megatron asserts with tp > 1 before Blackwell (arguments.py:1475-1478).
  CHECK_THAT(e.err, Catch::Matchers::Contains("export CUDA_DEVICE_MAX_CONNECTIONS=1"));
}

TEST_CASE("Megatron-LM arguments give the same report as the equivalent --layout", "[cli][megatron]") {
  struct Equiv {
    const char* megatron;
    const char* layout;
  };
  const Equiv cases[] = {
      {"--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 --use-distributed-optimizer "
       "--micro-batch-size 1 --overlap-grad-reduce --overlap-param-gather",
       "tp=2,pp=1,zero=1,mbs=1"},
      // Every other Megatron flag is ignored; model-shape flags that match are accepted.
      {"--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --ffn-hidden-size 11008 --lr 3e-4 "
       "--swiglu --tensor-model-parallel-size=4 --sequence-parallel --recompute-granularity selective "
       "--micro-batch-size 2 --overlap-grad-reduce",
       "tp=4,sp=1,recompute=selective,mbs=2"},
      {"--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 4 "
       "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --overlap-grad-reduce",
       "pp=4,vpp=2,recompute=full"},
      {"--pipeline-model-parallel-size 4 --recompute-granularity full --recompute-method block "
       "--recompute-num-layers 4 --overlap-grad-reduce",
       "pp=4,recompute=full,recompute_method=block,recompute_layers=4"},
      {"--pipeline-model-parallel-size 2 --checkpoint-activations --overlap-grad-reduce", "pp=2,recompute=full"},
      // Megatron-LM 2021-08 to 2022-04 (c1e0689d): the method alone turns on full recomputation.
      {"--pipeline-model-parallel-size 2 --activations-checkpoint-method uniform --overlap-grad-reduce",
       "pp=2,recompute=full"},
  };
  for (const Equiv& c : cases) {
    INFO(c.megatron << "  vs  " << c.layout);
    // Megatron trains with dropout 0.1 unless told (transformer_config.py:188, 191); the example's model has none.
    const json m = run_json({}, {"check", kLlama2Example, "--format", "json", "--megatron-args",
                                 std::string(c.megatron) + " --attention-dropout 0.0 --hidden-dropout 0.0"});
    const json l = run_json({}, {"check", kLlama2Example, "--format", "json", "--layout", c.layout});
    CHECK(m.at("peak_memory_bytes") == l.at("peak_memory_bytes"));
    CHECK(m == l);
  }
  // Without --overlap-param-gather the distributed optimizer gathers the
  // parameters after the step (Megatron's default): the same memory, more exposed DP time.
  const json sync = run_json({}, {"check", kLlama2Example, "--format", "json", "--megatron-args",
                                  "--tensor-model-parallel-size 2 --use-distributed-optimizer --micro-batch-size 1 "
                                  "--overlap-grad-reduce --attention-dropout 0 --hidden-dropout 0"});
  const json over = run_json({}, {"check", kLlama2Example, "--format", "json", "--layout", "tp=2,pp=1,zero=1,mbs=1"});
  CHECK(sync.at("peak_memory_bytes") == over.at("peak_memory_bytes"));
  CHECK(sync.at("time").at("dp_comm_s").get<double>() > over.at("time").at("dp_comm_s").get<double>());
  // --no-async-tensor-model-parallel-allreduce (Megatron-LM 2021-09 to 2023-11): the input-gradient all-reduce in
  // line after its GEMM instead of beside the weight gradient; the same memory, more exposed TP time.
  const json in_line = run_json({}, {"check", kLlama2Example, "--format", "json", "--megatron-args",
                                     "--tensor-model-parallel-size 2 --micro-batch-size 1 --overlap-grad-reduce "
                                     "--no-async-tensor-model-parallel-allreduce"});
  const json async = run_json({}, {"check", kLlama2Example, "--format", "json", "--megatron-args",
                                   "--tensor-model-parallel-size 2 --micro-batch-size 1 --overlap-grad-reduce"});
  CHECK(in_line.at("peak_memory_bytes") == async.at("peak_memory_bytes"));
  CHECK(in_line.at("time").at("tp_comm_s").get<double>() > async.at("time").at("tp_comm_s").get<double>());
  // --deterministic-mode: flash attention's deterministic backward, a little more compute.
  const json det = run_json({}, {"check", kLlama2Example, "--format", "json", "--megatron-args",
                                 "--tensor-model-parallel-size 2 --micro-batch-size 1 --overlap-grad-reduce "
                                 "--deterministic-mode"});
  CHECK(det.at("peak_memory_bytes") == async.at("peak_memory_bytes"));
  CHECK(det.at("time").at("compute_s").get<double>() > async.at("time").at("compute_s").get<double>());
  // ... and --emit megatron gives the flag back.
  TempDir dir;
  const Result emitted = run_paraplan({"explain", kLlama2Example, "--emit", "megatron", "--megatron-args",
                                       "--tensor-model-parallel-size 2 --deterministic-mode"},
                                      dir.path());
  CHECK(emitted.code == 0);
  CHECK(emitted.out.find(" --deterministic-mode") != std::string::npos);
  // --no-overlap-p2p-communication: the interleaved schedule's pipeline sends in line; the same memory, more
  // exposed pipeline time, and --emit megatron gives the flag back (only where there is interleaving).
  const char* const interleaved = "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 4 "
                                  "--micro-batch-size 1 --overlap-grad-reduce";
  const json p2p_in_line = run_json({}, {"check", kLlama2Example, "--format", "json", "--megatron-args",
                                         std::string(interleaved) + " --no-overlap-p2p-communication"});
  const json p2p_beside = run_json({}, {"check", kLlama2Example, "--format", "json", "--megatron-args", interleaved});
  CHECK(p2p_in_line.at("peak_memory_bytes") == p2p_beside.at("peak_memory_bytes"));
  CHECK(p2p_in_line.at("time").at("pp_comm_s").get<double>() > p2p_beside.at("time").at("pp_comm_s").get<double>());
  const Result p2p_emitted = run_paraplan({"explain", kLlama2Example, "--emit", "megatron", "--megatron-args",
                                           std::string(interleaved) + " --no-overlap-p2p-communication"},
                                          dir.path());
  CHECK(p2p_emitted.code == 0);
  CHECK(p2p_emitted.out.find(" --no-overlap-p2p-communication") != std::string::npos);
  // --overlap-p2p-communication-warmup-flush: the warm-up and cool-down sends beside compute too; refused beside
  // --no-overlap-p2p-communication, as Megatron refuses the pair (model_parallel_config.py:570-574).
  const json flush = run_json({}, {"check", kLlama2Example, "--format", "json", "--megatron-args",
                                   std::string(interleaved) + " --overlap-p2p-communication-warmup-flush"});
  CHECK(flush.at("time").at("pp_comm_s").get<double>() < p2p_beside.at("time").at("pp_comm_s").get<double>());
  const Result both = run_paraplan({"check", kLlama2Example, "--megatron-args",
                                    std::string(interleaved) +
                                        " --no-overlap-p2p-communication --overlap-p2p-communication-warmup-flush"},
                                   dir.path());
  CHECK(both.code == 2);
  CHECK(both.err.find("--overlap-p2p-communication-warmup-flush") != std::string::npos);
  // The spec's key says the same.
  const std::string base = "model: llama-2-7b\ncluster: dgx-h100\nnum_nodes: 1\ntraining:\n  seq_length: 4096\n"
                           "  global_batch_size: 64\n  flash_attention: true\n";
  const Files specs = {{"off.yaml", base + "  overlap_p2p_comm: false\n"}, {"on.yaml", base}};
  const json off = run_json(specs, {"check", "@DIR@/off.yaml", "--format", "json", "--layout", "pp=4,vpp=2,mbs=1"});
  const json on = run_json(specs, {"check", "@DIR@/on.yaml", "--format", "json", "--layout", "pp=4,vpp=2,mbs=1"});
  CHECK(off.at("time").at("pp_comm_s").get<double>() > on.at("time").at("pp_comm_s").get<double>());
  CHECK(off.at("peak_memory_bytes") == on.at("peak_memory_bytes"));
  TempDir bad_dir;
  std::ofstream(bad_dir.path() / "bad.yaml") << base << "  overlap_p2p_comm: false\n  overlap_p2p_comm_warmup_flush: true\n";
  const Result bad = run_paraplan({"check", "bad.yaml", "--layout", "pp=4,vpp=2,mbs=1"}, bad_dir.path());
  CHECK(bad.code == 2);
  CHECK(bad.err.find("training.overlap_p2p_comm_warmup_flush") != std::string::npos);
}

TEST_CASE("a DeepSpeed config sets ZeRO stage and micro-batch", "[cli][deepspeed]") {
  const Files ds = {{"ds.json",
                     "{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 3},"
                     " \"bf16\": {\"enabled\": true}}\n"}};
  const json j = run_json(ds, {"check", kLlama2Example, "--format", "json", "--deepspeed-config", "@DIR@/ds.json"});
  CHECK(j.at("layout") == "dp=8,tp=1,pp=1,vpp=1,sp=0,zero=3,recompute=none,mbs=1,schedule=1f1b");
  // A DeepSpeed config implies the deepspeed profile.
  CHECK(j.at("framework") == "deepspeed");
  const json l = run_json({}, {"check", kLlama2Example, "--format", "json", "--layout", "zero=3,mbs=1", "--framework", "deepspeed"});
  CHECK(j == l);
  // Megatron-DeepSpeed: tp from Megatron arguments, ZeRO from the config.
  const json both = run_json(ds, {"check", kLlama2Example, "--format", "json", "--deepspeed-config",
                                  "@DIR@/ds.json", "--megatron-args", "--tensor-model-parallel-size 2"});
  CHECK(both.at("layout") == "dp=4,tp=2,pp=1,vpp=1,sp=0,zero=3,recompute=none,mbs=1,schedule=1f1b");
}

TEST_CASE("a HuggingFace config.json model gives the YAML model's report", "[cli][hf]") {
  const std::string spec_tail =
      "cluster: @SRC@/configs/clusters/dgx-h100.yaml\nnum_nodes: 1\ntraining:\n  seq_length: 4096\n"
      "  global_batch_size: 512\nlayout: \"tp=2,zero=1\"\n";
  const json hf = run_json({{"spec.yaml", "model: @SRC@/tests/data/hf/llama-2-7b-hf/config.json\n" + spec_tail}},
                           {"check", "@DIR@/spec.yaml", "--format", "json"});
  const json yaml = run_json({{"spec.yaml", "model: @SRC@/configs/models/llama-2-7b.yaml\n" + spec_tail}},
                             {"check", "@DIR@/spec.yaml", "--format", "json"});
  CHECK(hf.at("params").at("total") == 6'738'415'616LL);
  CHECK(hf.at("peak_memory_bytes") == yaml.at("peak_memory_bytes"));
  CHECK(hf.at("memory") == yaml.at("memory"));
}

// ==== explain: human formats ====================================================

TEST_CASE("explain prints the table, the verdict and the formulas", "[cli][explain]") {
  TempDir dir;
  SECTION("table with --formulas") {
    const Result r = run_paraplan({"explain", kLlama2Example, "--formulas"}, dir.path());
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    for (const char* s : {"model    Llama-2-7B", "layout   dp=4,tp=2,pp=1", "<- heaviest", "FITS",
                          "stage 0 terms:", "Adam m, v", "framework megatron",
                          "source: NVIDIA/Megatron-LM@d98e8a64 megatron/core/distributed/param_and_grad_buffer.py"})
      CHECK(r.out.find(s) != std::string::npos);
  }
  SECTION("markdown") {
    const Result r = run_paraplan({"explain", kLlama2Example, "--format", "markdown"}, dir.path());
    CHECK(r.code == 0);
    CHECK(r.out.rfind("## paraplan explain", 0) == 0);
    CHECK(r.out.find("| stage |") != std::string::npos);
  }
  SECTION("explain exits 0 even when the layout does not fit (check is the gate)") {
    const Result r = run_paraplan({"explain", kLlama2Example, "--layout", "dp=8,tp=1"}, dir.path());
    CHECK(r.code == 0);
    CHECK(r.out.find("DOES NOT FIT") != std::string::npos);
  }
}

TEST_CASE("explain, check and plan carry the time model's warnings (issue 15)", "[cli]") {
  TempDir dir;
  const std::string spec = "@SRC@/configs/examples/llama3.1-405b-h100.yaml";
  // tp = 16 spans two 8-GPU nodes (only allowed with allow_tp_across_nodes in a search;
  // explain takes any layout).
  const std::string gpt3 = "@SRC@/configs/examples/gpt3-175b-a100.yaml";
  const Result e = run_paraplan({"explain", gpt3, "--format", "json", "--layout", "tp=16,pp=8,sp=1,zero=1,mbs=1"},
                                dir.path());
  INFO(e.err);
  REQUIRE(e.code == 0);
  const json j = json::parse(e.out);
  REQUIRE(j.at("warnings").is_array());
  REQUIRE(j.at("warnings").size() >= 1);
  CHECK(j.at("warnings")[0].get<std::string>().find("spans 2 nodes") != std::string::npos);
  const Result t = run_paraplan({"explain", gpt3, "--layout", "tp=16,pp=8,sp=1,zero=1,mbs=1"}, dir.path());
  CHECK(t.out.find("warning: the tensor-parallel group spans 2 nodes") != std::string::npos);
  // A layout it can vouch for: an empty list.
  const Result c = run_paraplan({"check", spec, "--format", "json", "--layout", "tp=8,pp=16,sp=1,zero=1,recompute=full,mbs=1,first_stage_layers=7,last_stage_layers=7"},
                                dir.path());
  CHECK(json::parse(c.out).at("warnings").empty());
  const Result p = run_paraplan({"plan", spec, "--format", "json", "--top", "3"}, dir.path());
  REQUIRE(p.code == 0);
  const json pj = json::parse(p.out);
  // The pick carries no warning but the utilization cap, which the decision rule clamps to (issue 46).
  for (const json& w : pj.at("recommended").at("warnings"))
    CHECK(w.get<std::string>().find("is above the best published for this GPU") != std::string::npos);
  CHECK(pj.at("candidates")[0].at("warnings").is_array());
}

TEST_CASE("a DeepSpeed config's overlap_comm and communication_data_type reach the time model (issue 15)",
          "[cli][deepspeed]") {
  auto ds = [](const std::string& zero_extra, const std::string& top_extra) {
    return "{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 2" + zero_extra +
           "}, \"bf16\": {\"enabled\": true}" + top_extra + "}\n";
  };
  auto run = [](const std::string& text) {
    return run_json({{"ds.json", text}}, {"check", kLlama2Example, "--format", "json", "--deepspeed-config", "@DIR@/ds.json"});
  };
  // Stage 2 without overlap_comm (deepspeed/runtime/zero/config.py:383-385: the
  // default is on at stage 3 only): every reduction is on the step's path.
  const json off = run(ds("", ""));
  CHECK(off.at("time").at("dp_comm_s").get<double>() ==
        Approx(off.at("time").at("dp_comm_total_s").get<double>()).epsilon(1e-9));
  const json on = run(ds(", \"overlap_comm\": true", ""));
  CHECK(on.at("time").at("dp_comm_s").get<double>() < off.at("time").at("dp_comm_s").get<double>());
  // The example accumulates gradients in fp32 (grad_dtype: fp32); communication_data_type
  // bf16 halves the bytes the reduce-scatter moves (latency terms aside).
  const json bf16 = run(ds("", ", \"communication_data_type\": \"bf16\""));
  CHECK(bf16.at("time").at("dp_comm_total_s").get<double>() < 0.55 * off.at("time").at("dp_comm_total_s").get<double>());
  CHECK(bf16.at("time").at("dp_comm_total_s").get<double>() > 0.45 * off.at("time").at("dp_comm_total_s").get<double>());
  run_error_cases({{"bad communication_data_type", base_with("ds.json", ds("", ", \"communication_data_type\": \"int8\"")),
                    check_with({"--deepspeed-config", "@DIR@/ds.json"}), 2,
                    {"@DIR@/ds.json: communication_data_type: ", "expected \"fp32\", \"bf16\" or \"fp16\""}},
                   {"bad overlap_comm", base_with("ds.json", ds(", \"overlap_comm\": 1", "")),
                    check_with({"--deepspeed-config", "@DIR@/ds.json"}), 2,
                    {"zero_optimization.overlap_comm: ", "expected true, false"}}});
}

TEST_CASE("Megatron's --squared-relu must describe the model: refused for Llama's SwiGLU, read for Nemotron's relu2",
          "[cli][errors][megatron]") {
  TempDir dir;
  const Result llama = run_paraplan({"check", kLlama2Example, "--megatron-args", "--squared-relu"}, dir.path());
  CHECK(llama.code == 2);
  CHECK(llama.err.find("--megatron-args: --squared-relu") != std::string::npos);
  CHECK(llama.err.find("not relu2") != std::string::npos);
  std::ofstream(dir.path() / "nemotron.yaml")
      << "model: " << PARAPLAN_SOURCE_DIR << "/tests/data/hf/nemotron-4-340b/config.json\n"
      << "cluster: " << PARAPLAN_SOURCE_DIR << "/configs/clusters/dgx-h100.yaml\n"
      << "num_nodes: 16\ntraining:\n  seq_length: 4096\n  global_batch_size: 32\n  flash_attention: true\n";
  const Result nemotron =
      run_paraplan({"check", "nemotron.yaml", "--megatron-args",
                    "--squared-relu --tensor-model-parallel-size 8 --sequence-parallel --pipeline-model-parallel-size 8 "
                    "--use-distributed-optimizer --recompute-granularity selective"},
                   dir.path());
  INFO(nemotron.err);
  CHECK((nemotron.code == 0 || nemotron.code == 1));
}

TEST_CASE("check warns where a layout fits only if the allocator flushes, and --strict fails it", "[cli][memory]") {
  // nanotron's 3B benchmark model, dp 8 tp 16 micro-batch 32 on 16 p5 nodes: 42 GiB of reduce-scatter inputs held
  // for the NCCL stream (2 x 28 layers x 2 B x 4096 x 32 x 3072) do not fit beside the ~43 GiB the rest needs.
  TempDir dir;
  const std::vector<std::string> args = {"check",     "--model",  "@SRC@/configs/models/nanotron-bench-3b.yaml",
                                         "--gpus",    "128",      "--gpu",
                                         "@SRC@/configs/clusters/h100-aws-p5.yaml",
                                         "--framework", "nanotron", "--seq-length",
                                         "4096",      "--global-batch-size", "256",
                                         "--layout",  "dp=8,tp=16,sp=1,zero=0,mbs=32"};
  const Result r = run_paraplan(args, dir.path());
  INFO(r.out << r.err);
  CHECK(r.code == 0);  // it fits
  CHECK(r.out.find("fits: dp=8,tp=16") == 0);
  CHECK(r.out.find("\nwarning: fits only if the caching allocator flushes mid-step") != std::string::npos);
  std::vector<std::string> strict = args;
  strict.push_back("--strict");
  CHECK(run_paraplan(strict, dir.path()).code == 1);
  std::vector<std::string> js = args;
  js.insert(js.end(), {"--format", "json"});
  const Result j = run_paraplan(js, dir.path());
  REQUIRE(j.code == 0);
  const json doc = json::parse(j.out);
  CHECK(doc.at("fits") == true);
  CHECK(doc.at("flush_risk") == true);
  CHECK(doc.at("memory").at("held_wanted_bytes") == 45'097'156'608LL);
  CHECK(doc.at("with_held_bytes").get<std::int64_t>() == doc.at("device_bytes").get<std::int64_t>() + 45'097'156'608LL);
  CHECK(doc.at("warnings").at(0).get<std::string>().find("fits only if the caching allocator flushes") == 0);
  // Micro-batch 16 holds half as much: no warning, and --strict passes.
  std::vector<std::string> small = strict;
  small[std::find(small.begin(), small.end(), "--layout") - small.begin() + 1] = "dp=8,tp=16,sp=1,zero=0,mbs=16";
  const Result q = run_paraplan(small, dir.path());
  CHECK(q.code == 0);
  CHECK(q.out.empty());
}

TEST_CASE("the defaults header lists only what was defaulted, not values a launch configuration gave (issue 46)",
          "[cli][precision]") {
  TempDir dir;
  // check's JSON "defaults" for Llama-2-7B on 8 H100 with one launch configuration.
  const auto defaults = [&](const char* flag, const std::string& value) {
    const Result r = run_paraplan({"check", "--model", "llama-2-7b", "--gpus", "8", "--gpu", "h100", flag, value,
                                   "--format", "json"},
                                  dir.path());
    INFO(r.err);
    REQUIRE((r.code == 0 || r.code == 1));
    return json::parse(r.out).at("defaults");
  };
  // --bf16 and --global-batch-size at the very values paraplan would choose (bf16; 4 Mi tokens / 4096 = 1024):
  // given, so not defaults. The sequence is still the default.
  const json m = defaults("--megatron-args", "--tensor-model-parallel-size 2 --bf16 --global-batch-size 1024");
  CHECK_FALSE(m.contains("precision"));
  CHECK_FALSE(m.contains("global_batch_size"));
  CHECK(m.at("seq_length") == 4096);
  // --fp16 is said as given, not "precision bf16 (default)".
  CHECK_FALSE(defaults("--megatron-args", "--tensor-model-parallel-size 2 --fp16").contains("precision"));
  // A DeepSpeed train_batch_size equal to the default batch is given too.
  std::ofstream(dir.path() / "ds.json") << R"({"train_batch_size": 1024, "train_micro_batch_size_per_gpu": 1,
                                               "zero_optimization": {"stage": 1}})";
  CHECK_FALSE(defaults("--deepspeed-config", "@DIR@/ds.json").contains("global_batch_size"));
}

TEST_CASE("BF16 on a GPU without BF16 (V100) is refused, naming the key or flag, and fp16 is its default",
          "[cli][errors][precision]") {
  TempDir dir;
  // The newcomer path on V100: fp16 chosen, and said so.
  const Result p = run_paraplan({"check", "--model", "llama-2-7b", "--gpus", "8", "--gpu", "v100", "--layout",
                                 "tp=4,pp=2,zero=1,recompute=full", "--format", "json"},
                                dir.path());
  INFO(p.err);
  REQUIRE((p.code == 0 || p.code == 1));
  const json j = json::parse(p.out);
  CHECK(j.at("defaults").at("precision") == "fp16");
  CHECK(j.at("memory").at("weights").get<std::int64_t>() > 0);
  // A spec asking for bf16 there names its key; so does each flag or config field that would turn it on.
  {
    std::ofstream spec(dir.path() / "v100-bf16.yaml");
    spec << "model: llama-2-7b\ncluster: v100\nnum_nodes: 2\ntraining:\n  seq_length: 4096\n  global_batch_size: 64\n"
            "  precision: bf16\n";
  }
  const Result s = run_paraplan({"check", "@DIR@/v100-bf16.yaml", "--layout", "tp=4,pp=2"}, dir.path());
  CHECK(s.code == 2);
  CHECK(s.out.empty());
  CHECK(s.err.find("v100-bf16.yaml") != std::string::npos);
  CHECK(s.err.find("training.precision: GPU V100-SXM2-32GB has no BF16 (cluster gpu.bf16: false); expected fp16 or fp32") !=
        std::string::npos);
  const Result m = run_paraplan({"check", "--model", "llama-2-7b", "--gpus", "8", "--gpu", "v100", "--megatron-args",
                                 "--tensor-model-parallel-size 4 --bf16"},
                                dir.path());
  CHECK(m.code == 2);
  CHECK(m.err.find("--megatron-args: --bf16: GPU V100-SXM2-32GB has no BF16") != std::string::npos);
  {
    std::ofstream ds(dir.path() / "ds.json");
    ds << "{\"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 1}}\n";
  }
  const Result d = run_paraplan({"check", "--model", "llama-2-7b", "--gpus", "8", "--gpu", "v100", "--deepspeed-config",
                                 "@DIR@/ds.json"},
                                dir.path());
  CHECK(d.code == 2);
  CHECK(d.err.find("bf16.enabled: GPU V100-SXM2-32GB has no BF16") != std::string::npos);
  // A bf16 spec moved onto a V100 with --gpu names the flag and the spec's key (the example says precision: bf16).
  const Result g = run_paraplan({"check", kLlama2Example, "--gpu", "v100"}, dir.path());
  CHECK(g.code == 2);
  CHECK(g.err == "paraplan: error: --gpu: GPU V100-SXM2-32GB has no BF16 (cluster gpu.bf16: false); the spec's "
                 "training.precision is bf16: expected fp16 or fp32\n");
  // A spec without a precision follows the GPU there: fp16.
  {
    std::ofstream spec(dir.path() / "any.yaml");
    spec << "model: llama-2-7b\ncluster: h100\nnum_nodes: 1\ntraining:\n  seq_length: 4096\n  global_batch_size: 64\n";
  }
  const Result f = run_paraplan({"check", "@DIR@/any.yaml", "--gpu", "v100", "--gpus", "8", "--layout",
                                 "tp=4,pp=2,recompute=full", "--format", "json"},
                                dir.path());
  INFO(f.err);
  REQUIRE((f.code == 0 || f.code == 1));
  CHECK(json::parse(f.out).at("memory").at("weights") == j.at("memory").at("weights"));
}

TEST_CASE("Megatron flags that change memory or time beyond the model are refused with the reason, not listed as ignored",
          "[cli][megatron]") {
  TempDir dir;
  // Each is a real flag of Megatron-LM@d98e8a64 (planner/megatron_flags.inc, generated from its sources) ...
  std::ifstream inc(std::string(PARAPLAN_SOURCE_DIR) + "/planner/megatron_flags.inc");
  const std::string flags((std::istreambuf_iterator<char>(inc)), std::istreambuf_iterator<char>());
  struct Refused {
    const char* args;
    const char* reason;
  };
  const Refused cases[] = {
      {"--use-torch-fsdp2", "torch FSDP2 is not modelled"},
      {"--optimizer-cpu-offload", "optimizer CPU offload"},
      {"--fine-grained-activation-offloading", "activation offloading"},
      {"--num-distributed-optimizer-instances 2", "expected 1, got '2'"},
      {"--use-precision-aware-optimizer --main-grads-dtype bf16", "16-bit main gradients"},
      {"--main-params-dtype fp16", "16-bit main parameters"},
      {"--exp-avg-dtype fp8", "low-precision Adam first moment"},
      {"--exp-avg-sq-dtype bf16", "low-precision Adam second moment"},
      {"--empty-unused-memory-level 2", "reserved memory"},
      {"--enable-cuda-graph", "CUDA graphs"},
      {"--external-cuda-graph", "CUDA graphs"},
      {"--cuda-graph-impl transformer_engine", "CUDA graphs"},
      {"--fp4 e2m1", "NVFP4"},
      {"--hybrid-override-pattern M-M-", "Mamba hybrid layers"},
      {"--is-hybrid-model", "Mamba hybrid layers"},
      {"--spec some.module Spec", "custom layer spec"},
      {"--heterogeneous-layers-config-path layers.json", "heterogeneous layers"},
      {"--moe-shared-expert-overlap", "shared experts' overlap"},
      {"--delay-wgrad-compute", "delayed weight-gradient"},
      {"--qk-layernorm", "no query/key norms"},
      {"--multi-latent-attention", "no multi-latent attention"},
      {"--optimizer muon", "'muon' is not modelled; expected adam or sgd"},
      {"--kv-channels 64", "is 64 but the model's head_dim is 128"},
      {"--fp8-format hybrid --num-layers-at-start-in-bf16 1", "layers kept in bf16 under FP8"},
  };
  for (const Refused& c : cases) {
    INFO(c.args);
    const std::string flag = std::string(c.args).substr(0, std::string(c.args).find(' '));
    CHECK(flags.find("\"" + flag + "\"") != std::string::npos);
    const Result r = run_paraplan({"check", kLlama2Example, "--megatron-args", c.args}, dir.path());
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Matchers::Contains(c.reason));
  }
  // ... and at the value that changes nothing, listed under -v as its default.
  const Result ok = run_paraplan({"check", kLlama2Example, "-v", "--megatron-args",
                                  "--num-distributed-optimizer-instances 1 --main-grads-dtype fp32 --empty-unused-memory-level 0 "
                                  "--cuda-graph-impl none --kv-channels 128 --optimizer adam"},
                                 dir.path());
  INFO(ok.err);
  CHECK(ok.code <= 1);
  CHECK_THAT(ok.err, Catch::Matchers::Contains("--empty-unused-memory-level 0 (the default)"));
  // A model that has query/key norms takes --qk-layernorm (Qwen3-30B-A3B: q_norm, k_norm).
  const Result qk = run_paraplan({"check", "--model", "qwen3-30b-a3b", "--gpus", "64", "--gpu", "h100", "--megatron-args",
                                  "--qk-layernorm --expert-model-parallel-size 8 --moe-token-dispatcher-type alltoall "
                                  "--use-distributed-optimizer"},
                                 dir.path());
  INFO(qk.err);
  CHECK(qk.code <= 1);
  // --optimizer sgd: SGD with momentum keeps one fp32 state per parameter, Adam two. Llama-2-7B's 6,738,415,616
  // parameters at tp 8: the 65 norms of 4096 (266,240) are replicated, the rest split, (6,738,415,616 - 266,240) / 8
  // + 266,240 = 842,534,912 per rank, so the optimizer terms differ by 4 B x 842,534,912 = 3,370,139,648 B.
  const json adam = run_json({}, {"check", kLlama2Example, "--format", "json", "--megatron-args", "--tensor-model-parallel-size 8"});
  const json sgd = run_json({}, {"check", kLlama2Example, "--format", "json", "--megatron-args",
                                 "--tensor-model-parallel-size 8 --optimizer sgd"});
  CHECK(adam.at("memory").at("optimizer").get<std::int64_t>() - sgd.at("memory").at("optimizer").get<std::int64_t>() ==
        3'370'139'648LL);
}
