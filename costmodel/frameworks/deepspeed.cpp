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
    // DDP_BFLOAT16 wrapper, an FP16_Optimizer with fp32 master copies; fp16
    // without ZeRO: the FP16_Optimizer, or FP16_UnfusedOptimizer where the
    // client optimizer is not a FusedAdam (engine.py:2279-2330).
    out->add({Category::kGradients, "gradients (param.grad)", w, false,
              DS "deepspeed/runtime/engine.py:2019 (DDP_BFLOAT16), :2065-2067"});
    out->add({Category::kOptimizer, "fp32 master params + Adam m, v", t.optimizer_state_bytes, false,
              DS "deepspeed/runtime/fp16/fused_optimizer.py (fp32 groups of the FP16_Optimizer)"});
    // Their step casts every gradient to fp32 beside the 16-bit ones before
    // the inner optimizer steps (the unfused wrapper one tensor per parameter,
    // the fused one a flat tensor per group, whose per-parameter copies it
    // concatenates are not counted), and drops the copies after it.
    out->add({Category::kTransient, "fp32 gradient copies at the optimizer step", 4, false,
              DS "deepspeed/runtime/fp16/unfused_optimizer.py:215-220 (fp32_param.grad = fp16_param.grad.to(fp32) for "
                 "every parameter), :225-231 (optimizer.step(), then fp32_param.grad = None); fused_optimizer.py:285-291 "
                 "(_flatten_dense_tensors of p.grad.to(fp32) per group); engine.py:2279-2330 (which wrapper)",
              true});
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

// DeepSpeed-MoE (deepspeed.moe.layer.MoE around the user's expert module) as
// modelled: experts not tensor-parallel (enable_expert_tensor_parallelism is
// not), tp = 1 (its drop_tokens / gather_tokens over tp are not modelled),
// top-k >= 2 (top1gating's random token selection is not), no shared experts
// (use_residual's PR-MoE is not Qwen2-MoE's or DeepSeek's shared experts), no
// multi-latent attention, ZeRO 0-2 (engine.py:1889-1891 refuses stage 3). With
// ZeRO 1/2 the experts' state is partitioned over the expert data-parallel
// group (stage_1_and_2.py:781-790), as the shared state loop does (edp).
const char* moe_layout(const Model& m, const Layout& l) {
  if (l.tp > 1 || l.expert_tp() > 1)
    return "DeepSpeed-MoE is modelled with tp = 1 and etp = 1 (its expert tensor parallelism and the "
           "drop/gather of duplicate tokens over tp are not); use ep and dp";
  if (l.zero >= 3)
    return "native DeepSpeed-MoE is not supported with ZeRO stage 3 (deepspeedai/DeepSpeed@edaa7221 "
           "deepspeed/runtime/engine.py:1889-1891): zero 0-2";
  if (m.experts_per_token < 2) return "DeepSpeed-MoE's top1gating (random token selection) is not modelled: top-k >= 2";
  if (m.num_shared_experts > 0) return "shared experts are not DeepSpeed-MoE's (use_residual is PR-MoE's residual expert)";
  if (m.mla()) return "multi-latent attention under DeepSpeed is not modelled; use framework megatron";
  return nullptr;
}

Profile with_deepspeed_moe(Profile p) {
  p.act.moe = MoeImpl::kDeepSpeed;
  p.act.moe_source = DS "deepspeed/moe/sharded_moe.py:587-591 (TopKGate: fp32 input and weight), :341-431 "
                        "(top2gating), :434-525 (topkgating), :207-232 (_sparse_encode / _sparse_decode: index_select), "
                        ":699-766 (MOELayer.forward), experts.py:27-37 (local experts on slices of the dispatched rows)";
  p.moe_layout_unsupported = moe_layout;
  p.moe_padded_to_capacity = true;
  p.moe_capacity = DS "deepspeed/moe/sharded_moe.py:162-171 (C = ceil(tokens / experts x capacity_factor x k)), "
                      ":383, :465 (capacity x k), :484-495 (drop_tokens=False: C = the busiest expert's count), "
                      ":216-220 (every expert's buffer is C rows)";
  // _sparse_decode (:226-232): index_select reads and writes the k routed
  // copies (2 passes in the activation dtype), the gate multiply reads them (1)
  // and writes fp32 (1), the sum over routes reads fp32 (1); the gate's
  // input.float() (:587) reads the input and writes fp32.
  p.time.moe_combine_act_passes = 3;
  p.time.moe_combine_fp32_passes = 2;
  p.time.moe_router_act_passes = 1;
  p.time.moe_router_fp32_passes = 1;
  p.time.moe_passes = DS "deepspeed/moe/sharded_moe.py:226-232 (decode: index_select, fp32 gate multiply, sum), :587 (gate input fp32)";
  p.time.moe_alltoall = DS "deepspeed/moe/sharded_moe.py:97-109 (_AllToAll: all_to_all_single of the padded E x C buffer, "
                           "synchronous), :719-751 (dispatch and combine)";
  return p;
}

// The loss's backward through PyTorch's own cross-entropy (the HF model's
// F.cross_entropy on fp32 logits, tests/oracle measures it): S, G and dX live
// together; the logits, freed when the Trainer's compute_loss returns, leave a
// block too small for dX.
// DeepSpeed's PipelineEngine with tp > 1 (pipe_partitioned, on by default):
// a stage's output is cut to this rank's 1/tp partition, which is sent and
// kept in pipe_buffers['outputs'] until the micro-batch's backward; the full
// output's data is freed (its graph kept).
Profile with_partitioned_pipe_outputs(Profile p) {
  p.pipe_output_partition = DS "deepspeed/runtime/pipe/engine.py:143 (is_pipe_partitioned = is_model_parallel and "
                               "pipe_partitioned), :755-774 (PartitionedTensor of the first output; first_output.data = "
                               "torch.zeros(1); the partition kept in pipe_buffers['outputs']), :888-889 (released after the "
                               "backward); deepspeed/runtime/config.py:435 (pipe_partitioned: True)";
  return p;
}

Profile with_eager_loss_backward(Profile p) {
  p.loss.backward_fp32_extra = 2;
  p.loss.backward = "pytorch aten nll_loss_backward (a dense fp32 gradient) and _log_softmax_backward_data (a new "
                    "fp32 output) while log_softmax's output is saved (tests/oracle measures the peak); the logits die "
                    "with the forward's outputs before the backward (huggingface/transformers@000945a9 "
                    "src/transformers/trainer.py Trainer.compute_loss: `return (loss, outputs) if return_outputs else "
                    "loss`; Trainer.training_step: compute_loss, then self.accelerator.backward(loss))";
  p.loss.backward_logits_stranded = true;
  return p;
}

}  // namespace

const Profile& deepspeed_profile() {
  static const Profile p = [] {
    Profile q = with_partitioned_pipe_outputs(with_eager_loss_backward(with_deepspeed_moe(with_reduce_buckets(
        with_post_step_param_gather(Profile{
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
                  false, "the bf16 logits stay referenced by the caller through the loss", 0, "", 0, "", false},
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
      ReduceBuckets::kFixed,
      DS "deepspeed/runtime/zero/config.py:113 (reduce_bucket_size 5e8 elements per reduction; allgather_bucket_size "
         "the same, :132)"))));
    q.gathered_by_prefetch_bucket =
        DS "deepspeed/runtime/zero/partitioned_param_coordinator.py:310-485 (fetch_sub_module: the current module's "
           "parameters, then prefetch while numel_prefetching < min(max_live - available, prefetch_bucket_size)), "
           ":494-530 (released after the module); zero/config.py:215, 238 (stage3_prefetch_bucket_size 5e7, "
           "stage3_max_live_parameters 1e9)";
    q.terms = TermSources{
        8,
        "JUDGEMENT: the user's batch, int64 token ids and labels as HF tokenizers and datasets give them (DeepSpeed "
        "passes the batch through: deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/engine.py:2801, forward)",
        "the user's PyTorch model; modelled as HF-style: the final norm and the lm_head nn.Linear save their inputs "
        "(tests/oracle measures the output layer and loss)",
        DS "deepspeed/runtime/pipe/engine.py:1047-1082 (_exec_send_activations: the stage's outputs from its pipe "
           "buffers), :1083-1138 (_exec_send_grads)",
        DS "deepspeed/runtime/pipe/engine.py:278 (_exec_reduce_tied_grads after the last micro-batch), "
           "pipe/module.py:457 (allreduce_tied_weight_gradients)",
        "the user's PyTorch model; modelled as HF-style GPT (dropout after the embeddings)"};
    // DeepSpeed's engine has no tensor parallelism of its own: the user's model brings it (Megatron-DeepSpeed's
    // mappings), priced with every collective in line.
    q.time.tp_backward = "the user's model's tensor parallelism (e.g. Megatron-DeepSpeed's mpu mappings), not "
                         "DeepSpeed's engine: its collectives priced in line, none beside a GEMM";
    return q;
  }();
  return p;
}

}  // namespace paraplan
