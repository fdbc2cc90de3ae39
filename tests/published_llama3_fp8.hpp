// NVIDIA's published Llama 3 FP8 rows on H100 (Megatron-LM README, Megatron-Bridge tables): each row's
// recipe as Megatron arguments, shared by the throughput test and the decision rule's measurement.
#pragma once

#include <string>
#include <vector>

#include "costmodel/spec.hpp"
#include "planner/layout_source.hpp"
#include "test_helpers.hpp"

namespace paraplan::test {

// NVIDIA/Megatron-LM@d98e8a64 examples/llama/README.md:105-109, "FP8 Performance": tokens/s per GPU of
// NeMo's performance recipes on H100, MBS 1, seq 8192, no recompute (NVIDIA/NeMo
// scripts/performance/recommended_model_configs/model_configs_h100.csv: recompute_layers 0). The flags
// are those of the README's own script, examples/llama/train_llama3_8b_h100_fp8.sh (FP8 hybrid with
// --fp8-param-gather, --grad-reduce-in-bf16, --cross-entropy-loss-fusion, distributed optimizer with
// overlapped grad reduce and param gather, fused attention), with each row's parallel sizes; SP and TP
// communication overlap where tp > 1 (NeMo's recipes: pretrain_llama31_405b.py sets
// tp_comm_overlap_cfg). 405B's 126 layers over PP 8 x VP 8 chunks of 2 count the embedding and
// the loss as one layer each (Megatron's --account-for-embedding/loss-in-pipeline-split: 128 / 64).
// Rows marked "Megatron-Bridge" are NVIDIA-NeMo/Megatron-Bridge@0a25f911 docs/performance-summary-archive.md
// (NeMo's Megatron-core recipes, DGX-H100, FP8): the 25.11 table's LLAMA3_8B with Megatron-FSDP over 8
// GPUs (14,451; the 25.09 table: 14,079) and the 26.02 table's LLAMA3_70B and LLAMA3.1_405B at twice and
// three times the README's global batch (more micro-batches per step: a smaller pipeline bubble).
// The recipes' other flags are not listed there: the README script's are used.
struct PublishedLlama3Fp8 {
  const char* name;
  const char* model;
  int gpus, global_batch;
  const char* parallel;
  double tokens_per_s_per_gpu;
};

inline std::vector<PublishedLlama3Fp8> published_llama3_fp8() {
  // The 70B and 405B layouts (NeMo's recipes, both sources).
  const char* const llama70 =
      "--tensor-model-parallel-size 4 --sequence-parallel --tp-comm-overlap --pipeline-model-parallel-size 8 "
      "--num-virtual-stages-per-pipeline-rank 5";
  const char* const llama405 =
      "--tensor-model-parallel-size 8 --sequence-parallel --tp-comm-overlap --pipeline-model-parallel-size 8 "
      "--num-virtual-stages-per-pipeline-rank 8 --account-for-embedding-in-pipeline-split "
      "--account-for-loss-in-pipeline-split --context-parallel-size 2";
  return {
      {"LLAMA3-8B, 8 GPUs, CP 2", "llama-3.1-8b", 8, 128,
       "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 2", 13812},
      {"LLAMA3-70B, 64 GPUs, TP 4, PP 8, VP 5", "llama-3.1-70b", 64, 128, llama70, 1621},
      {"LLAMA3-405B, 1024 GPUs, TP 8, PP 8, CP 2, VP 8", "llama-3.1-405b", 1024, 512, llama405, 315},
      {"Megatron-Bridge 25.11: LLAMA3_8B, 8 GPUs, Megatron-FSDP 8", "llama-3.1-8b", 8, 128,
       "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --use-megatron-fsdp "
       "--data-parallel-sharding-strategy optim_grads_params",
       14451},
      {"Megatron-Bridge 26.02: LLAMA3_70B, GBS 256", "llama-3.1-70b", 64, 256, llama70, 1621},
      {"Megatron-Bridge 26.02: LLAMA3.1_405B, GBS 1536", "llama-3.1-405b", 1024, 1536, llama405, 311},
  };
}

// The row's run: the spec on DGX H100 nodes at seq 8192 with the recipe's training settings, and the
// published layout, read through the Megatron arguments of the README's script
// (examples/llama/train_llama3_8b_h100_fp8.sh) with the row's parallel sizes; the flags read as not
// changing memory or time go to *ignored.
inline Layout published_llama3_fp8_run(const PublishedLlama3Fp8& p, Spec* s, std::vector<std::string>* ignored) {
  const std::string common =
      " --micro-batch-size 1 --seq-length 8192 --bf16 --fp8-format hybrid --fp8-amax-history-len 1024 "
      "--fp8-amax-compute-algo max --fp8-param-gather --grad-reduce-in-bf16 --cross-entropy-loss-fusion "
      "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --attention-backend fused "
      "--attention-dropout 0.0 --hidden-dropout 0.0";  // the script's lines 69-70
  *s = Spec{};
  s->model = model(p.model);
  s->cluster = cluster("dgx-h100");
  s->num_nodes = p.gpus / 8;
  s->training.seq_length = 8192;
  s->training.global_batch_size = p.global_batch;
  s->training.flash_attention = true;
  LayoutRequest req;
  req.megatron_args = std::string(p.parallel) + " --global-batch-size " + std::to_string(p.global_batch) + common;
  req.ignored_flags = ignored;
  return layout_from_sources(s, "megatron-llama-fp8", req);
}

}  // namespace paraplan::test
