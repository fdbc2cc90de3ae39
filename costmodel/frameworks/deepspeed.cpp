// DeepSpeed ZeRO (deepspeed/runtime/zero/stage_1_and_2.py, stage3.py) with bf16
// and its engine's default optimizer wrappers; the model is the user's own
// PyTorch module, modelled as an unfused HF-style Llama/GPT block.
#include "costmodel/frameworks/profile.hpp"
#include "costmodel/memory.hpp"

namespace paraplan {

namespace {

#define DS "deepspeedai/DeepSpeed@edaa7221 "

void state(const Training& t, const Layout& l, StateBuffers* out) {
  const double w = dtype_bytes(t.precision);
  out->add({Category::kWeights, l.zero >= 3 ? "parameters (ZeRO-3 partition)" : "parameters", w, l.zero >= 3,
            DS "deepspeed/runtime/zero/stage3.py (partitioned params); stages 0-2 keep them whole"});
  // The BF16_Optimizer (deepspeed/runtime/bf16_optimizer.py): bf16 with ZeRO-1
  // and grad_accum_dtype fp32 (engine.py:1994-1996), or bf16 without ZeRO
  // under pipeline parallelism (engine.py:2013-2018). A whole flat gradient
  // buffer in the accumulation dtype (:176-177), fp32 master and Adam state
  // partitioned over dp (:162-171).
  const bool bf16 = t.precision == DType::kBf16;
  const bool fp32_accum = t.grad_dtype_given && t.grad_dtype == DType::kFp32;
  if (bf16 && ((l.zero == 1 && fp32_accum) || (l.zero == 0 && l.pp > 1))) {
    const double g = t.grad_dtype_given ? dtype_bytes(t.grad_dtype) : w;
    out->add({Category::kGradients, "BF16_Optimizer flat gradient buffer", g, false,
              DS "deepspeed/runtime/bf16_optimizer.py:176-177 (zeros_like(bf16 flat, grad_acc_dtype)); engine.py:1994-1996, 2013-2018"});
    out->add({Category::kOptimizer, "fp32 master partition + Adam m, v (BF16_Optimizer)", t.optimizer_state_bytes, true,
              DS "deepspeed/runtime/bf16_optimizer.py:162-171 (fp32 partition of the flat bf16 group)"});
    return;
  }
  if (l.zero == 0) {
    // bf16 with gradient accumulation in bf16 (the default) and no ZeRO: the
    // DDP_BFLOAT16 wrapper, an FP16_Optimizer with fp32 master copies.
    out->add({Category::kGradients, "gradients (param.grad)", w, false,
              DS "deepspeed/runtime/engine.py:2019 (DDP_BFLOAT16), :2065-2067"});
    out->add({Category::kOptimizer, "fp32 master params + Adam m, v", t.optimizer_state_bytes, false,
              DS "deepspeed/runtime/fp16/fused_optimizer.py (fp32 groups of the FP16_Optimizer)"});
    return;
  }
  if (l.zero == 1)
    out->add({Category::kGradients, "gradients (param.grad, whole until the accumulation boundary)", w, false,
              DS "deepspeed/runtime/zero/stage_1_and_2.py:1764-1769 (ZeRO-1 reduces only at the boundary)"});
  else
    out->add({Category::kGradients, l.zero == 2 ? "gradient partition (grads_in_partition)" : "gradient partition", w, true,
              DS "deepspeed/runtime/zero/stage_1_and_2.py:1678"});
  out->add({Category::kGradients, "fp32 gradient partition", 4, true,
            DS "deepspeed/runtime/zero/stage_1_and_2.py:837-844 (allocated zeroed at optimizer-state init)"});
  out->add({Category::kOptimizer, "fp32 master partition + Adam m, v", t.optimizer_state_bytes, true,
            DS "deepspeed/runtime/zero/stage_1_and_2.py:489-493,509"});
}

}  // namespace

const Profile& deepspeed_profile() {
  static const Profile p = without_moe(with_post_step_param_gather(Profile{
      Framework::kDeepSpeed,
      "deepspeed",
      "DeepSpeed ZeRO 0-3 with bf16 (default wrappers), an unfused PyTorch model",
      {true, true, true, true},
      "",
      {true, false, true},
      "DeepSpeed has activation checkpointing of whole layers (recompute=full), no selective policy of its own",
      state,
      ActivationVariant{
          true, "pytorch: x * silu(g) unfused, SiLU output saved by the multiply (the PyTorch oracle test measures it)",
          false, "",
          true, "pytorch: the norm's fp32 statistics (HF Llama RMSNorm upcasts to fp32; the oracle measures it)",
          "the user's PyTorch model; modelled as eager HF-style blocks (tests/oracle measures them)",
          true, "transformers LlamaRMSNorm.forward: hidden_states.to(float32), pow/mean/rsqrt, weight * hidden_states.to(input_dtype) (tests/oracle measures it)"},
      LossVariant{true, true, false, 0,
                  "pytorch: F.cross_entropy(logits.float()): the upcast lives with log_softmax's output (tests/oracle measures it)",
                  false, "the bf16 logits stay referenced by the caller through the loss"},
      false,
      "",
      0,
      "no sequence parallelism",
      BucketRule::kFixedIpg,
      500'000'000,
      DS "deepspeed/runtime/zero/config.py:113 (reduce_bucket_size 5e8), stage_1_and_2.py:2500-2513 (torch.empty(reduce_bucket_size); x2 only with overlap_comm, default off below stage 3: config.py:138)",
      2,
      0,
      false,
      DS "deepspeed/runtime/zero/config.py:215 (stage3_prefetch_bucket_size 5e7)",
      "DeepSpeed checkpoints what the model code wraps (deepspeed.checkpointing); it has no --recompute-method: use recompute=full",
      "DeepSpeed's sequence parallelism (Ulysses) exchanges heads by all-to-all, not a KV ring; not modelled: use cp=1",
      nullptr,
      "",
      TimeVariant{3, 4,
                  "the model's own loss: huggingface/transformers src/transformers/loss/loss_utils.py ForCausalLMLoss "
                  "(logits.float(), then nn.functional.cross_entropy; version unnamed): aten log_softmax reads each row twice (max, sum of exps) and writes it (3 passes), "
                  "nll_loss gathers; backward nll_loss_backward writes a dense gradient (1), log_softmax_backward reads "
                  "the gradient and the output and writes (3)",
                  0, ""}},
      DS "deepspeed/runtime/zero/stage_1_and_2.py:2394-2401 (step(): all_gather_dp_groups of the updated bit16 partitions, synchronous, in allgather_bucket_size buckets, before step() returns)"),
      // DeepSpeed-MoE routes differently from what paraplan models (top-1/top-2
      // gating with a capacity and dense one-hot einsum dispatch): not modelled.
      "DeepSpeed-MoE (deepspeedai/DeepSpeed@edaa7221 deepspeed/moe/layer.py, sharded_moe.py:235 top1gating, "
      "top2gating: top-1/top-2 gating with a capacity, einsum dispatch) is not modelled; use framework megatron or fsdp (torchtitan) for a "
      "mixture of experts");
  return p;
}

}  // namespace paraplan
