// Megatron-LM (megatron/core) with Transformer Engine, as its GPT layer spec
// builds a model (megatron/core/models/gpt/gpt_layer_specs.py).
#include "costmodel/frameworks/profile.hpp"
#include "costmodel/memory.hpp"

namespace paraplan {

namespace {

#define MCORE "NVIDIA/Megatron-LM@d98e8a64 "

// The contiguous main_grad buffer is fp32 unless --grad-reduce-in-bf16
// (grad_dtype: bf16 given in the spec).
double main_grad_bytes(const Training& t) { return t.grad_dtype_given ? double(dtype_bytes(t.grad_dtype)) : 4.0; }

void state(const Training& t, const Layout& l, StateBuffers* out) {
  const double w = dtype_bytes(t.precision);
  // main_grad is never sharded by the distributed optimizer, only by Megatron-FSDP (zero >= 2).
  const double g = main_grad_bytes(t);
  out->add({Category::kWeights, l.zero >= 3 ? "parameters (Megatron-FSDP shard)" : "parameters", w, l.zero >= 3,
            MCORE "megatron/core/distributed/param_and_grad_buffer.py:1182-1189"});
  out->add({Category::kGradients, l.zero >= 2 ? "main_grad buffer (Megatron-FSDP shard)" : "main_grad buffer", g,
            l.zero >= 2, MCORE "megatron/core/distributed/param_and_grad_buffer.py:924 (fp32 while grad_reduce_in_fp32, the bf16 default), :1190-1195"});
  out->add({Category::kOptimizer, l.zero >= 1 ? "fp32 main params + Adam m, v (distributed optimizer)" : "fp32 main params + Adam m, v",
            t.optimizer_state_bytes, l.zero >= 1,
            MCORE "megatron/core/optimizer/distrib_optimizer.py:412-414,445; optimizer.py:964,1012"});
  // A 16-bit main_grad is cast to fp32 at the optimizer step (.float(); of an
  // fp32 buffer it is the view itself), by the distributed optimizer for its
  // shard, by Megatron-FSDP (zero >= 2, whose grads the distributed optimizer
  // leaves to it, distrib_optimizer.py:2767-2771) for its shard too,
  // otherwise for every parameter; the next iteration's zero_grad, before its
  // forward, drops those grads: an optimizer-step buffer.
  if (g < 4 && t.precision != DType::kFp32) {
    const bool shard = l.zero >= 1, fsdp = l.zero >= 2;
    const char* name = fsdp    ? "fp32 copy of the 16-bit main_grad shard at the optimizer step (Megatron-FSDP)"
                       : shard ? "fp32 copy of the 16-bit main_grad shard at the optimizer step"
                               : "fp32 copies of the 16-bit main_grad at the optimizer step";
    const char* source =
        fsdp ? MCORE "megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py:3351-3406 "
                     "(update_main_grads: the grad shard, only_shard with the optimizer state sharded, :3374-3376, "
                     "optimizer_grad.to(param.dtype) for fp32 main weights, :3377-3381), megatron_fsdp.py:1369-1374, "
                     ":1394 (attached in finish_grad_sync, after the last backward), param_and_grad_buffer.py:3189-3214 "
                     "(zero_grad drops it unless megatron_fsdp_cuda_graph_mode), distrib_optimizer.py:2568-2582 "
                     "(optimizer.zero_grad calls it), megatron/training/training.py:3044 (before the forward-backward)"
        : shard ? MCORE "megatron/core/optimizer/distrib_optimizer.py:2782-2792 (shard_main_param.grad = "
                        "shard_model_grad.float()), :2568-2598 (zero_grad: shard_fp32_from_float16_groups' grads set "
                        "to None), megatron/training/training.py:3044 (optimizer.zero_grad() in train_step, before "
                        "the forward-backward)"
                : MCORE "megatron/core/optimizer/optimizer.py:1092-1099 (main_param.grad = model_param.main_grad.float()), "
                        ":1048-1061 (dropped by the next zero_grad)";
    out->add({Category::kTransient, name, 4, shard, source, true});
  }
}

}  // namespace

const Profile& megatron_profile() {
  static const Profile p = [] {
    Profile q = with_te_workspaces(with_mtp(with_reduce_buckets(Profile{
      Framework::kMegatron,
      "megatron",
      "Megatron-LM core with Transformer Engine (fused SwiGLU, TE LayerNorm+Linear, fp32 main_grad buffer)",
      {true, true, true, true},
      "",
      {true, true, true},
      "",
      state,
      ActivationVariant{
          false, MCORE "megatron/core/fusions/fused_bias_swiglu.py:163-184 (saves the fc1 output only)",
          false, "TransformerEngine@d0067d0d transformer_engine/pytorch/attention/dot_product_attention/backends.py:1655-1664",
          true, "TransformerEngine@d0067d0d transformer_engine/pytorch/module/layernorm_linear.py:526-536 (rsigma fp32)",
          MCORE "megatron/core/models/gpt/gpt_layer_specs.py:145-157 (TE LayerNorm+Linear, TEDotProductAttention)",
          false, "TE fused norms"},
      LossVariant{true, true, true, 16,
                  MCORE "megatron/core/tensor_parallel/cross_entropy.py:25 (.float() copy), :42 (max subtracted in place), "
                        "fp32 logits_max, sum_exp_logits, predicted_logits and loss per token",
                  false, "the bf16 logits stay referenced while the fp32 copy is made: nothing freed before it",
                  // --cross-entropy-loss-fusion: the eager path's in-place updates of the fp32
                  // logits (-= max, exp_, div_, the gradient's mul_) run inside torch.compile'd
                  // functions, whose results are fresh buffers: one more fp32 logit shard at the
                  // peak. Measured: Megatron's CI gpt3_mcore_te_tp2_pp2_cross_entropy_loss_fusion
                  // golden (H100) holds 0.46 GB over the unfused prediction, one fp32 shard
                  // 0.41 GB (tests/test_measurements.cpp).
                  1,
                  MCORE "megatron/core/jit.py:21-25 (jit_fuser = torch.compile from torch 2.2), "
                        "fusions/fused_cross_entropy.py:12-82 (calculate_logits_max, calculate_predicted_logits, "
                        "calculate_cross_entropy_loss, calculate_gradients: jit_fuser'd)",
                  0, "", false},
      true,
      MCORE "megatron/core/utils.py:727-753 (GlobalMemoryBuffer), tensor_parallel/layers.py:623-629",
      2,
      MCORE "megatron/core/tensor_parallel/mappings.py:186 (reduce_scatter_tensor(output, input_)); " "pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp ([Sync Streams]: recordStream(input, ncclStream) in collective(); stored copy, version unnamed) + c10/cuda/CUDACachingAllocator.cpp (free of a block with stream uses waits for its events); counted in allocated as well: MEASURED, Megatron-LM's functional-test goldens (max_memory_allocated, tests/test_measurements.cpp) sit 7-9 % under on the sequence-parallel runs without them; its test runner exports TORCH_NCCL_AVOID_RECORD_STREAMS=1 (" MCORE "tests/functional_tests/shell_test_utils/_run_training.sh:66), so ProcessGroupNCCL stashes the inputs instead of recording the stream: which tensors stay live there is not traced",
      BucketRule::kNone,
      40'000'000,
      MCORE "megatron/training/training.py:2179-2194 (buckets of max(40M, 1M x dp) params are views of main_grad)",
      2,
      0,
      false,
      "Megatron-FSDP (megatron/core/distributed/fsdp): not modelled beyond current + prefetched layer",
      nullptr,
      nullptr,
      main_grad_bytes,
      MCORE "megatron/training/arguments.py:1213-1217 (fp32 accumulate and reduce unless --grad-reduce-in-bf16)",
      TimeVariant{8, 2,
                  MCORE "megatron/core/models/common/language_module/language_module.py:200 (unfused "
                        "vocab_parallel_cross_entropy unless --cross-entropy-loss-fusion); tensor_parallel/cross_entropy.py:25 "
                        "(.float()), :27 (max: read), :42 (-= max: read + write), :62 (exp in place), :63 (sum: read), "
                        ":77 (div_: read + write) = 8 fp32 passes; backward :114 (mul_: read + write) = 2, and the "
                        "cast's gradient back to bf16",
                  0,
                  MCORE "megatron/training/arguments.py:2944 (--no-gradient-accumulation-fusion: fusion on by default, "
                        "the weight-gradient GEMM accumulates into the fp32 main_grad; no separate pass)",
                  [](const Training& t) { return dtype_bytes(t.precision) + 2 * main_grad_bytes(t); },
                  MCORE "megatron/core/distributed/distributed_data_parallel.py:578 (without the fusion, "
                        "param.main_grad.add_(param.grad.data) after each weight gradient: read the gradient and "
                        "main_grad, write main_grad: 2 + 4 + 4 B, 2 + 2 + 2 with --grad-reduce-in-bf16); before the "
                        "fusion (83b1e42f, 2022-02) autograd added each gradient to param.grad the same way "
                        "(pytorch/pytorch@bc2c6eda torch/csrc/autograd/functions/accumulate_grad.h accumulateGrad: "
                        "variable_grad += new_grad)",
                  true,
                  "NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/module/layernorm_linear.py:786-791 "
                  "(backward: gather_along_first_dim(ln_out, async_op=True) before the dgrad GEMM), :898-910 "
                  "(dgrad reduce_scatter / allreduce async_op=True, waited after the wgrad GEMM); linear.py:1120-1132; "
                  "Megatron-core's own layers (--transformer-impl local) the same: " MCORE
                  "megatron/core/tensor_parallel/layers.py:694-696 (input-gradient all_reduce async_op=True before the "
                  "weight-gradient GEMM), :807-808 (waited after it)",
                  false,
                  "Transformer Engine's forward gathers before the GEMM unless --tp-comm-overlap (userbuffers)",
                  0, 0, 0, "",
                  // --cross-entropy-loss-fusion (native, the default impl): four jit-fused
                  // kernels. The cast kernel also takes the max (read bf16, write fp32: the
                  // cast term only); subtract-exp-sum reads and writes the fp32 logits once
                  // (2 passes); the normalising div_ once more (2). Backward: the gradient is
                  // computed from the saved softmax and written in bf16 in one kernel
                  // (read 4 B, write 2 B: the cast term only).
                  4, 0,
                  MCORE "megatron/core/models/common/language_module/language_module.py:173,197-198 "
                        "(--cross-entropy-loss-fusion, impl native: model_parallel_config.py:325); "
                        "fusions/fused_cross_entropy.py:12-22 (.float() + max in one kernel), :25-44 (-= max, exp, "
                        "sum: read + write), :47-60 (div_: read + write) = 4 fp32 passes; backward :64-82 "
                        "(gradient from the saved softmax written as bf16) = the cast's gradient only",
                  true,
                  MCORE "megatron/core/optimizer/distrib_optimizer.py:3175-3177 (synchronous param all-gather after "
                        "the step unless overlap_param_gather); distributed/distributed_data_parallel.py:479 (with "
                        "--overlap-param-gather, forward pre-hooks dispatch each bucket's gather before its layers)"}},
      ReduceBuckets::kMegatronDdp,
      MCORE "megatron/training/training.py:2179-2193 (resolve_ddp_bucket_size: max(40M, 1M x dp·cp) parameters per "
            "bucket; None, one bucket, without --overlap-grad-reduce)"),
      MCORE "megatron/core/transformer/multi_token_prediction.py (--mtp-num-layers; built only when given, "
            "megatron/training/models/gpt.py:414)"),
      "NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/cpp_extensions/gemm.py:37 (_NUM_MAX_UB_STREAMS 3), "
      ":40-46 (32 MiB + 1 KiB on sm90+, 4 MiB before), :49-67 (get_cublas_workspace, lru_cache: one for GEMMs, one per "
      "compute stream for grouped GEMMs, 3 for userbuffers), :227, :415; common/util/multi_stream.cpp:52-54 (4 compute "
      "streams)");
    // The interleaved schedule's pipeline sends beside the other direction's chunk (costmodel/time.cpp
    // pipeline_send_overlap), on unless --no-overlap-p2p-communication.
    q.time.p2p_overlaps_interleaved = true;
    q.time.p2p_overlap = MCORE "megatron/core/pipeline_parallel/schedules.py:1747-1830 (steady 1F1B: "
                               "send_forward_recv_forward / send_backward_recv_backward with overlap_p2p_comm=True, waited "
                               "before the next chunk needs them), :1633-1660 (warm-up sends in line without "
                               "--overlap-p2p-communication-warmup-flush), :964-965 (warm-up 2 (p - rank - 1) + (v - 1) x "
                               "group chunks); megatron/training/arguments.py:3118-3120 (--no-overlap-p2p-communication: on "
                               "by default since 4eeff55d1f, 2023-10), :1010-1012 (off without interleaving)";
    // The reduce-scatter inputs held at sequence parallelism count in allocated too (the reason: held_reduce_scatter).
    q.held_in_allocated = true;
    // Issue 46: check said "fits" for a GPipe layout that --emit megatron refuses.
    q.gpipe_note = "Megatron-LM has no GPipe schedule: its pipeline runs 1F1B, interleaved when vpp > 1 (" MCORE
                   "megatron/core/pipeline_parallel/schedules.py get_forward_backward_func: "
                   "forward_backward_pipelining_without_interleaving / _with_interleaving)";
    q.terms = TermSources{
        8,
        MCORE "megatron/core/datasets/gpt_dataset.py:280-286 (text.long(): int64 tokens and labels), "
              "megatron/core/utils.py:2272-2291 (get_batch_on_this_tp_rank: tokens on the first stage, labels on the "
              "last; position_ids and the fp32 loss_mask beside them not counted)",
        MCORE "megatron/core/tensor_parallel/layers.py:604 (the output layer's ColumnParallelLinear saves its input); "
              "the final norm saves its own",
        MCORE "megatron/core/pipeline_parallel/p2p_communication.py:280-300 (_communicate sends the stage's output or "
              "input gradient itself), schedules.py:171-200, 1660, 1690 (deallocate_output_tensor once it is sent)",
        MCORE "megatron/core/distributed/finalize_model_grads.py:164-203 (_allreduce_word_embedding_grads after the "
              "last micro-batch's backward)",
        MCORE "megatron/core/models/common/embeddings/language_model_embedding.py:90, 154-156 (embedding_dropout), "
              "megatron/core/tensor_parallel/layers.py:372-380 (VocabParallelEmbedding's output reduce-scattered with "
              "sequence parallelism)"};
    return q;
  }();
  return p;
}

}  // namespace paraplan
