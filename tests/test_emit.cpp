// Issue 17: --emit prints a layout as a framework's launch settings; the
// Megatron-LM flags and the DeepSpeed JSON read back (--megatron-args,
// --deepspeed-config) to the layout they were made from.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>

#include "cli_runner.hpp"

using namespace paraplan::test;
using nlohmann::json;

namespace {

const std::string k70b = "@SRC@/configs/examples/llama3.1-70b-h100-64.yaml";  // 64 GPUs, seq 8192, batch 512
const std::string k7b = "@SRC@/configs/examples/llama2-7b-dgx-h100.yaml";      // 8 GPUs, seq 4096, batch 512

std::string checked_layout(const Result& r) {
  REQUIRE(r.code <= 1);  // fits or not: both read the layout
  return json::parse(r.out)["layout"].get<std::string>();
}

// The "with Megatron-DeepSpeed pass: ..." note, or "".
std::string megatron_deepspeed_note(const std::string& err) {
  const std::string tag = "with Megatron-DeepSpeed pass:";
  const size_t at = err.find(tag);
  if (at == std::string::npos) return "";
  return err.substr(at + tag.size(), err.find('\n', at) - at - tag.size());
}

}  // namespace

TEST_CASE("emit megatron: the flags read back through --megatron-args to the same layout", "[emit][cli]") {
  TempDir dir;
  // Each layout in its canonical form (costmodel/layout.cpp prints vpp, sp, schedule always).
  const std::pair<std::string, std::string> layouts[] = {
      {"dp=2,tp=8,pp=4,vpp=5,sp=1,zero=1,recompute=selective,mbs=1",
       "dp=2,tp=8,pp=4,vpp=5,sp=1,zero=1,recompute=selective,mbs=1,schedule=1f1b"},
      {"dp=2,tp=4,cp=2,pp=4,sp=1,zero=1,recompute=full,recompute_method=block,recompute_layers=2,mbs=1,"
       "first_stage_layers=18,last_stage_layers=18",
       "dp=2,tp=4,cp=2,pp=4,vpp=1,sp=1,zero=1,recompute=full,mbs=1,schedule=1f1b,recompute_method=block,"
       "recompute_layers=2,first_stage_layers=18,last_stage_layers=18"},
      {"dp=8,tp=8,zero=3,recompute=full,mbs=1", "dp=8,tp=8,pp=1,vpp=1,sp=0,zero=3,recompute=full,mbs=1,schedule=1f1b"},
      {"dp=16,tp=4,zero=2,mbs=2", "dp=16,tp=4,pp=1,vpp=1,sp=0,zero=2,recompute=none,mbs=2,schedule=1f1b"},
      {"dp=64,zero=0,recompute=full,mbs=1", "dp=64,tp=1,pp=1,vpp=1,sp=0,zero=0,recompute=full,mbs=1,schedule=1f1b"},
  };
  for (const auto& [given, canonical] : layouts) {
    INFO(given);
    const Result e = run_paraplan({"explain", k70b, "--layout", given, "--emit", "megatron"}, dir.path());
    REQUIRE(e.code == 0);
    CHECK(std::count(e.out.begin(), e.out.end(), '\n') == 1);  // one line of flags
    CHECK(e.out.find("--seq-length 8192 --bf16") != std::string::npos);
    CHECK(e.out.find("--global-batch-size 512") != std::string::npos);
    const std::string flags = e.out.substr(0, e.out.size() - 1);
    CHECK(checked_layout(run_paraplan({"check", k70b, "--megatron-args", flags, "--format", "json"}, dir.path())) ==
          canonical);
  }
  // ZeRO-3 is Megatron-FSDP sharding parameters, gradients and optimizer (arguments.py:3190).
  const Result z3 = run_paraplan({"explain", k70b, "--layout", "dp=8,tp=8,zero=3,mbs=1", "--emit", "megatron"}, dir.path());
  CHECK(z3.out.find("--use-megatron-fsdp --use-distributed-optimizer --data-parallel-sharding-strategy optim_grads_params") !=
        std::string::npos);
  CHECK(z3.err.find("dp = GPUs / (tp x pp x cp) = 8") != std::string::npos);
  // Megatron-FSDP's own asserts (arguments.py:1166-1170): the fsdp_dtensor checkpoint format, and
  // CUDA_DEVICE_MAX_CONNECTIONS not 1 (tp 8 here, which without FSDP would need it 1).
  CHECK(z3.out.find("optim_grads_params --ckpt-format fsdp_dtensor") != std::string::npos);
  CHECK(z3.err.find("leave CUDA_DEVICE_MAX_CONNECTIONS unset or above 1") != std::string::npos);
  // The line reads back to the same layout.
  const std::string z3_flags = z3.out.substr(0, z3.out.find('\n'));
  CHECK(checked_layout(run_paraplan({"check", k70b, "--megatron-args", z3_flags, "--format", "json"}, dir.path())).find("zero=3") !=
        std::string::npos);
}

TEST_CASE("emit megatron: a rank one layer short under interleaving is Megatron's account-for flags (issue 14)",
          "[emit][cli][uneven]") {
  // Llama-3.1-405B's 126 layers on 16 stages with 8 interleaved chunks: 7 + 14 x 8 + 7. Megatron-LM@d98e8a64
  // refuses --decoder-first-pipeline-num-layers 7 with 8 chunks (7 % 8, transformer_config.py:2306-2316); it
  // builds that split only as (126 + 2) / 16 = 8 counted layers a rank, the embedding and the loss one each
  // (--account-for-embedding/loss-in-pipeline-split, :2370-2410).
  TempDir dir;
  const std::string k405 = "@SRC@/configs/examples/llama3.1-405b-h100.yaml";
  const std::string layout = "dp=64,tp=8,cp=2,pp=16,vpp=8,sp=1,zero=1,recompute=selective,mbs=1,first_stage_layers=7,last_stage_layers=7";
  const Result e = run_paraplan({"explain", k405, "--layout", layout, "--emit", "megatron"}, dir.path());
  INFO(e.err);
  REQUIRE(e.code == 0);
  CHECK(e.out.find("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split") != std::string::npos);
  CHECK(e.out.find("--decoder-first-pipeline-num-layers") == std::string::npos);
  const std::string flags = e.out.substr(0, e.out.size() - 1);
  CHECK(checked_layout(run_paraplan({"check", k405, "--megatron-args", flags, "--format", "json"}, dir.path())) ==
        "dp=64,tp=8,cp=2,pp=16,vpp=8,sp=1,zero=1,recompute=selective,mbs=1,schedule=1f1b,first_stage_layers=7,"
        "last_stage_layers=7");
  // Divisible by the chunks: the decoder flags, as before.
  const Result d = run_paraplan(
      {"explain", k405, "--layout", "tp=8,pp=16,vpp=2,sp=1,zero=1,mbs=1,first_stage_layers=6,last_stage_layers=8", "--emit",
       "megatron"},
      dir.path());
  CHECK(d.out.find("--decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 8") != std::string::npos);
  // Only the first rank short: DeepSeek-V3's 61 layers as 30 + 31 in 31 chunks, (61 + 1) / 2 = 31 a rank.
  const Result ds = run_paraplan({"explain", "@SRC@/configs/examples/deepseek-v3-h800.yaml", "--global-batch-size", "2048",
                                  "--layout", "tp=1,pp=2,vpp=31,ep=64,zero=1,mbs=1,first_stage_layers=30,last_stage_layers=31",
                                  "--emit", "megatron"},
                                 dir.path());
  REQUIRE(ds.code == 0);
  CHECK(ds.out.find("--account-for-embedding-in-pipeline-split") != std::string::npos);
  CHECK(ds.out.find("--account-for-loss-in-pipeline-split") == std::string::npos);
  // Neither: 6 and 8 layers in 8 chunks (6 is not one short of 8): refused, as Megatron refuses it.
  const Result bad = run_paraplan(
      {"explain", k405, "--layout", "tp=8,pp=16,vpp=8,sp=1,zero=1,mbs=1,first_stage_layers=6,last_stage_layers=8"},
      dir.path());
  CHECK(bad.code == 2);
  CHECK(bad.err.find("vpp") != std::string::npos);
  CHECK(bad.err.find("account-for-embedding") != std::string::npos);
}

TEST_CASE("emit deepspeed: the JSON reads back through --deepspeed-config to the same layout", "[emit][cli]") {
  TempDir dir;
  Result e = run_paraplan({"explain", k7b, "--layout", "dp=8,zero=3,recompute=full,mbs=2", "--emit", "deepspeed"}, dir.path());
  REQUIRE(e.code == 0);
  const json j = json::parse(e.out);  // stdout is the config alone
  CHECK(j["train_batch_size"] == 512);
  CHECK(j["train_micro_batch_size_per_gpu"] == 2);
  CHECK(j["gradient_accumulation_steps"] == 32);  // 512 / (2 x 8)
  CHECK(j["bf16"]["enabled"] == true);
  CHECK(j["zero_optimization"]["stage"] == 3);
  std::ofstream(dir.path() / "ds.json") << e.out;
  std::string extra = megatron_deepspeed_note(e.err);
  CHECK(extra == " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  CHECK(checked_layout(run_paraplan({"check", k7b, "--deepspeed-config", "@DIR@/ds.json", "--megatron-args", extra,
                                     "--format", "json"},
                                    dir.path())) == "dp=8,tp=1,pp=1,vpp=1,sp=0,zero=3,recompute=full,mbs=2,schedule=1f1b");
  // tp and pp are Megatron-DeepSpeed flags, said on stderr; ZeRO-1 with a pipeline is allowed.
  e = run_paraplan({"explain", k7b, "--layout", "dp=2,tp=2,pp=2,sp=1,zero=1,recompute=full,mbs=1", "--emit", "deepspeed"},
                   dir.path());
  REQUIRE(e.code == 0);
  CHECK(json::parse(e.out)["gradient_accumulation_steps"] == 256);  // 512 / (1 x 2)
  std::ofstream(dir.path() / "ds2.json") << e.out;
  extra = megatron_deepspeed_note(e.err);
  CHECK(extra == " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel "
                 "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  CHECK(checked_layout(run_paraplan({"check", k7b, "--deepspeed-config", "@DIR@/ds2.json", "--megatron-args", extra,
                                     "--format", "json"},
                                    dir.path())) ==
        "dp=2,tp=2,pp=2,vpp=1,sp=1,zero=1,recompute=full,mbs=1,schedule=1f1b");
}

TEST_CASE("emit torchtitan and nanotron: the settings of the layout by hand", "[emit][cli]") {
  TempDir dir;
  Result e = run_paraplan({"explain", k70b, "--layout", "dp=4,tp=4,pp=4,vpp=2,sp=1,zero=3,recompute=full,mbs=1", "--emit",
                           "torchtitan"},
                          dir.path());
  REQUIRE(e.code == 0);
  // torchtitan@b5bcd76c reads a Python function returning Trainer.Config (no TOML): the fields of
  // ParallelismConfig / TrainingConfig set on the user's baseline, and the activation checkpointing policy.
  for (const char* line :
       {"def paraplan_layout(config: Trainer.Config) -> Trainer.Config:\n",
        "    config.parallelism.data_parallel_replicate_degree = 1\n", "    config.parallelism.data_parallel_shard_degree = 4\n",
        "    config.parallelism.fsdp_reshard_after_forward = \"always\"\n", "    config.parallelism.tensor_parallel_degree = 4\n",
        "    config.parallelism.enable_sequence_parallel = True\n", "    config.parallelism.pipeline_parallel_degree = 4\n",
        "    config.parallelism.pipeline_parallel_schedule = \"Interleaved1F1B\"\n",
        "    config.parallelism.pipeline_parallel_layers_per_stage = 10\n",  // 80 layers / (4 x 2)
        "    config.parallelism.pipeline_parallel_first_stage_less_layers = 0\n",
        "    config.parallelism.num_pp_microbatches = 128\n",  // 512 / (4 x 1)
        "    config.training.num_tokens_per_microbatch_per_dp_rank = 8192\n",
        "    config.training.num_tokens_per_train_step = 4194304\n", "    config.activation_checkpoint = FullAC.Config()\n",
        "    return config\n"})
    CHECK(e.out.find(line) != std::string::npos);
  CHECK(e.out.find("[parallelism]") == std::string::npos);
  if (std::ifstream("/usr/bin/python3").good()) {
    // It is Python: the system interpreter compiles it (imports are not resolved: no torchtitan here).
    const std::string file = (dir.path() / "layout.py").string();
    std::ofstream(file) << e.out;
    CHECK(std::system(("/usr/bin/python3 -c \"import ast,sys; ast.parse(open(sys.argv[1]).read())\" " + file).c_str()) == 0);
  }
  // ZeRO-2: FSDP2 without resharding after the forward; selective recompute is torchtitan's per-op SelectiveAC.
  e = run_paraplan({"explain", k7b, "--layout", "dp=8,zero=2,recompute=selective,mbs=1", "--emit", "torchtitan"}, dir.path());
  CHECK(e.out.find("data_parallel_shard_degree = 8\n    config.parallelism.fsdp_reshard_after_forward = \"never\"\n") !=
        std::string::npos);
  CHECK(e.out.find("    config.activation_checkpoint = SelectiveAC.Config()\n") != std::string::npos);
  e = run_paraplan({"explain", k7b, "--layout", "dp=8,zero=3,recompute=none,mbs=1", "--emit", "torchtitan"}, dir.path());
  CHECK(e.out.find("    config.activation_checkpoint = None\n") != std::string::npos);

  e = run_paraplan({"explain", k7b, "--layout", "dp=2,tp=2,pp=2,sp=1,zero=1,recompute=full,mbs=2,schedule=gpipe", "--emit",
                    "nanotron"},
                   dir.path());
  REQUIRE(e.code == 0);
  const YAML::Node y = YAML::Load(e.out);
  CHECK(y["parallelism"]["dp"].as<int>() == 2);
  CHECK(y["parallelism"]["tp"].as<int>() == 2);
  CHECK(y["parallelism"]["pp"].as<int>() == 2);
  CHECK(y["parallelism"]["pp_engine"].as<std::string>() == "afab");  // nanotron's all-forward-all-backward = GPipe
  CHECK(y["parallelism"]["tp_mode"].as<std::string>() == "REDUCE_SCATTER");
  CHECK(y["parallelism"]["recompute_layer"].as<bool>());
  CHECK(y["tokens"]["micro_batch_size"].as<int>() == 2);
  CHECK(y["tokens"]["batch_accumulation_per_replica"].as<int>() == 128);  // 512 / (2 x 2)
  CHECK(y["optimizer"]["zero_stage"].as<int>() == 1);
}

TEST_CASE("emit refuses what the framework cannot run and names why (plan --emit skips such layouts)", "[emit][cli]") {
  TempDir dir;
  const std::pair<std::vector<std::string>, std::string> bad[] = {
      {{"--layout", "dp=2,tp=2,pp=2,zero=1,mbs=1,schedule=gpipe", "--emit", "megatron"}, "no GPipe schedule"},
      {{"--layout", "dp=8,zero=1,mbs=1", "--emit", "torchtitan"}, "FSDP2 shards parameters, gradients and optimizer"},
      {{"--layout", "dp=8,zero=1,recompute=selective,mbs=1", "--emit", "deepspeed"}, "no selective policy"},
      {{"--layout", "dp=2,pp=4,vpp=2,zero=1,mbs=1", "--emit", "nanotron"}, "no interleaved"},
      {{"--layout", "dp=2,pp=4,zero=3,mbs=1", "--emit", "deepspeed"}, "engine.py:77"},
      {{"--layout", "dp=8,zero=1,mbs=1", "--emit", "colossal"}, "expected megatron, deepspeed, torchtitan or nanotron"},
  };
  for (const auto& [args, says] : bad) {
    std::vector<std::string> a = {"explain", k7b};
    a.insert(a.end(), args.begin(), args.end());
    const Result r = run_paraplan(a, dir.path());
    INFO(says);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("--emit") != std::string::npos);
    CHECK(r.err.find(says) != std::string::npos);
  }
  // plan --emit: the recommendation (named on stderr) is what the flags say, under the framework's accounting.
  const Result p = run_paraplan({"plan", "--model", "llama-3.1-8b", "--gpus", "16", "--gpu", "h100", "--emit", "megatron"},
                                dir.path());
  REQUIRE(p.code == 0);
  const size_t at = p.err.find("recommended ");
  REQUIRE(at != std::string::npos);
  const std::string rec = p.err.substr(at + 12, p.err.find(':', at) - at - 12);
  CHECK(checked_layout(run_paraplan({"check", "--model", "llama-3.1-8b", "--gpus", "16", "--gpu", "h100", "--megatron-args",
                                     p.out.substr(0, p.out.size() - 1), "--format", "json"},
                                    dir.path())) == rec);
  const Result t = run_paraplan({"plan", "--model", "llama-3.1-8b", "--gpus", "16", "--gpu", "h100", "--emit", "torchtitan"},
                                dir.path());
  REQUIRE(t.code == 0);
  CHECK(t.out.find("config.parallelism.tensor_parallel_degree = ") != std::string::npos);
  CHECK(t.err.find("zero=1,") == std::string::npos);  // torchtitan has no ZeRO-1: never recommended for it
}
