// PyTorch FSDP2 (fully_shard) as torchtitan applies it: one FSDP group per
// transformer block, bf16 compute with fp32 sharded parameters, fp32 gradient
// reduce-scatter (torchtitan defaults), unfused eager PyTorch ops.
#include "costmodel/frameworks/profile.hpp"
#include "costmodel/memory.hpp"

namespace paraplan {

namespace {

#define TT "pytorch/torchtitan@b5bcd76c "

void state(const Training& t, const Layout&, StateBuffers* out) {
  // The sharded parameter is kept in fp32 and is the optimizer's master copy:
  // no separate master, so the optimizer holds only Adam's m and v.
  const double master = t.precision == DType::kFp32 ? 0 : 4;
  out->add({Category::kWeights, "fp32 sharded parameters", 4, true,
            TT "torchtitan/config/configs.py:94 (mixed_precision_param bf16: the fp32 shard is cast at all-gather)"});
  out->add({Category::kGradients, "fp32 sharded gradients", 4, true,
            TT "torchtitan/config/configs.py:102 (mixed_precision_reduce fp32)"});
  out->add({Category::kOptimizer, "Adam m, v (on the fp32 shard)", t.optimizer_state_bytes - master, true,
            "pytorch torch.optim.AdamW on DTensor shards: state in the parameter dtype"});
}

// torchtitan's MoE as modelled here: experts sharded over ep, not tp (the
// grouped experts' TP sharding and DTensor sequence parallelism are not
// modelled), GQA/MHA attention (its DeepSeek-V3 multi-latent attention is not
// Megatron's, which is what the MLA terms describe), SwiGLU experts
// (GroupedExperts has w1, w2, w3 only: moe.py:45-53).
const char* moe_layout(const Model& m, const Layout& l) {
  if (l.tp > 1 || l.expert_tp() > 1)
    return "a mixture of experts under torchtitan is modelled with tp = 1 and etp = 1 (its tensor-parallel "
           "experts are not); use ep and dp";
  if (m.mla()) return "torchtitan's multi-latent attention (models/deepseek_v3) is not modelled; use framework megatron";
  if (!m.gated()) return "torchtitan's GroupedExperts are SwiGLU (w1, w2, w3: models/common/moe.py:45-53); this model's experts are not gated";
  return nullptr;
}

// torchtitan's per-op selective AC as modelled: a dense Llama-style block
// (no biases: F.linear with a bias is not an aten.mm), flash SDPA, tp = 1 and
// cp = 1 (DTensor TP's reduce-scatter outputs and the context-parallel SDPA
// would be kept too; not modelled).
const char* selective_unsupported(const Model& m, const Layout& l, const Training& t) {
  if (m.is_moe()) return "torchtitan's per-op selective AC is modelled for dense models; use recompute=none or full";
  if (m.mla()) return "torchtitan's per-op selective AC is modelled for Llama-style attention, not multi-latent";
  if (m.bias) return "torchtitan's per-op selective AC counts aten.mm (its models have no linear biases); this model has biases";
  if (!t.flash_attention) return "torchtitan's per-op selective AC keeps SDPA's flash output; set training.flash_attention: true";
  if (l.tp > 1 || l.cp > 1)
    return "torchtitan's per-op selective AC is modelled with tp = 1 and cp = 1 (DTensor tensor/context parallelism "
           "keeps more); use recompute=full there";
  return nullptr;
}

}  // namespace

const Profile& fsdp_profile() {
  static const Profile p = [] {
    Profile p{
      Framework::kFsdp,
      "fsdp",
      "PyTorch FSDP2 / torchtitan: fp32 sharded params, bf16 all-gather, fp32 reduce-scatter, eager ops",
      {false, false, true, true},
      "FSDP2 shards parameters, gradients and optimizer state together: zero=3 (reshard after forward) or "
      "zero=2 (reshard_after_forward=False); zero 0/1 are not FSDP layouts",
      {true, true, true},
      "",
      state,
      ActivationVariant{
          true, TT "torchtitan/models/llama3/model.py FeedForward: w2(F.silu(w1(x)) * w3(x)), unfused",
          false, "",
          true, "pytorch: RMSNorm saves its fp32 rstd (the oracle measures it)",
          TT "torchtitan/models/llama3/model.py (Attention, FeedForward, TransformerBlock), eager",
          false, TT "torchtitan/models/common/nn_modules.py:134 (nn.RMSNorm; modelled as PyTorch's fused rms_norm: input + fp32 rstd)",
          MoeImpl::kTorchtitan,
          TT "torchtitan/models/common/moe.py:290-317 (router gate under fp32 autocast, sigmoid/softmax, topk, gather), "
             ":94-108 (GroupedExperts: torch._grouped_mm w1, w3, silu, multiply, w2), token_dispatcher.py:93-100 "
             "(argsort reorder, x[indices]), :501-559 (EP permute / unpermute), :614-627 (combine: fp32 score multiply, "
             "deterministic_scatter_add), ops/scatter_add.py:36-42 (saves the index)"},
      LossVariant{true, true, false, 0,
                  TT "torchtitan/components/loss.py:57-58 (F.cross_entropy(pred.float())); pred held until the loss returns",
                  false, "nothing is freed before the fp32 requests", 0, "", 0, "", false},
      false,
      "",
      0,
      "DTensor sequence parallelism not modelled",
      BucketRule::kNone,
      0,
      "FSDP2 reduce-scatters per group, counted with the gathered groups",
      2,
      2 + 4,
      true,
      TT "torchtitan/distributed/fsdp.py:113-132 (reshard_after_forward); torch fully_shard all-gather and "
         "foreach_reduce: bf16 unsharded grads + fp32 reduce-scatter input per group",
      "torchtitan's full AC wraps every block; its per-layer 'selective' AC (every n-th block) is not Megatron's block method: use recompute=full",
      nullptr,
      [](const Training&) { return 4.0; },
      TT "torchtitan/config/configs.py:102 (mixed_precision_reduce: float32)",
      TimeVariant{3, 4,
                  TT "torchtitan/components/loss.py:32-50 (pred.float(), then F.cross_entropy): aten log_softmax reads "
                     "each row twice and writes it (3 passes); backward nll_loss_backward writes a dense gradient (1), "
                     "log_softmax_backward reads the gradient and the output and writes (3)",
                  0, ""}};
    p.moe_layout_unsupported = moe_layout;
    // recompute=selective: torchtitan's per-op selective AC ("op" policy).
    p.act.op_sac = true;
    p.act.op_sac_source =
        "pytorch/torchtitan@9dec370 torchtitan/parallelisms/parallelize_llama.py:214-285 (_save_list: aten.mm, "
        "SDPA flash/efficient; every second mm recomputed), torchtitan/models/llama/model.py (wq, wk, wv, wo; "
        "w2(F.silu(w1(x)) * w3(x)))";
    p.selective_unsupported = selective_unsupported;
    // The loss's backward: F.cross_entropy(pred.float()) under autograd keeps
    // S, G and dX at once (tests/oracle measures it); pred is deleted before
    // loss.backward(), its block too small for dX.
    p.loss.backward_fp32_extra = 2;
    p.loss.backward = TT "torchtitan/components/loss.py:57-62 (F.cross_entropy(pred.float(), reduction=sum)), "
                         "trainer.py:795-799 (del pred, then loss.backward()); pytorch aten nll_loss_backward (dense "
                         "fp32 gradient), _log_softmax_backward_data (new fp32 output) while log_softmax's output is saved";
    p.loss.backward_logits_stranded = true;
    // With tp > 1 the logits are vocab-parallel and torchtitan computes the
    // loss in its own autograd Function (at the published runs' 9dec370,
    // PyTorch's loss_parallel(), the same ops): the forward keeps the shifted
    // logits beside their exp, then beside the log-probabilities it saves (L,
    // F, shifted and exp or S: 14 B per logit against F.cross_entropy's 10);
    // the backward adds exp(S) to a zero-initialised gradient and multiplies
    // the sum, three fp32 tensors beside S (16 B against 12).
    p.has_loss_vocab_parallel = true;
    p.loss_vocab_parallel = p.loss;
    p.loss_vocab_parallel.forward_fp32_extra = 1;
    p.loss_vocab_parallel.source =
        TT "torchtitan/components/loss.py:41-43 (pred.to_local().float() into _LossParallelCrossEntropy), :146-157 "
           "(shifted = logits - local_max; torch.sum(torch.exp(shifted)); log_probs = shifted - log(sumexp)), :179 "
           "(saves log_probs); @9dec370 train.py:225-228 with torch.distributed.tensor.parallel.loss_parallel() "
           "(pytorch/pytorch@3be12382 torch/distributed/tensor/parallel/loss.py _log_softmax: the same ops)";
    p.loss_vocab_parallel.backward_fp32_extra = 3;
    p.loss_vocab_parallel.backward_tensors = "zeros_like(log_probs), exp(log_probs), their sum, then its product";
    p.loss_vocab_parallel.backward =
        TT "torchtitan/components/loss.py:201-215 (grad_input = torch.zeros_like(log_probs); (grad_input + "
           "torch.exp(log_probs)) * grad_output), trainer.py:795-799 (del pred, then loss.backward()); pytorch/pytorch@"
           "3be12382 torch/distributed/tensor/parallel/loss.py _nll_loss_and_log_softmax_backward (the same at 9dec370)";
    // Its passes over the fp32 logits: forward amax (read), shifted (read,
    // write), exp (read, write), sum (read), log-probabilities (read, write):
    // 7; backward zeros_like (write), exp (read, write), the sum (2 reads, a
    // write), the product (read, write): 8 (F.cross_entropy: 3 and 4).
    p.time.ce_vocab_parallel_passes_forward = 7;
    p.time.ce_vocab_parallel_passes_backward = 8;
    p.time.ce_vocab_parallel = TT "torchtitan/components/loss.py:146-157 (amax, logits - max, exp, sum, shifted - "
                                  "log), :201-214 (zeros_like, exp, add, multiply)";
    // Sequence parallelism through DTensor: the attention, feed-forward and
    // output modules take their input all-gathered to Replicate, which the
    // column-parallel linears save whole.
    p.act.sp_saves_gathered_linear_inputs = true;
    p.act.sp_gathered =
        "pytorch/torchtitan@9dec370 torchtitan/parallelisms/parallelize_llama.py:137-142 (norm SequenceParallel, "
        "output ColwiseParallel(input_layouts=Shard(1))), :177-188 (attention / feed_forward PrepareModuleInput to "
        "Replicate()); @b5bcd76c torchtitan/models/common/decoder_sharding.py:159-178 (the root norm's output "
        "gathered to R before lm_head)";
    // torchtitan launches with expandable segments (the published runs' commit too).
    p.expandable_segments = true;
    p.expandable = "pytorch/torchtitan@9dec370 run_llama_train.sh:22 and @b5bcd76c run_train.sh:43 "
                   "(PYTORCH_[CUDA_]ALLOC_CONF=\"expandable_segments:True\"); pytorch "
                   "c10/cuda/CUDACachingAllocator.cpp@001074d2 Note [Expandable Segments] (one segment per stream, "
                   "grown by mapping pages at its end), alloc_found_block (the block split at the rounded request, "
                   "512 B)";
    // The combine (token_dispatcher.py:616-619): .to(float32) reads the expert
    // output and writes fp32, the score multiply reads and writes fp32, .to()
    // back reads fp32 and writes the activation dtype; the router's fp32
    // autocast (moe.py:291-292) reads the norm output and writes its fp32 cast.
    p.time.moe_combine_act_passes = 2;
    p.time.moe_combine_fp32_passes = 4;
    p.time.moe_router_act_passes = 1;
    p.time.moe_router_fp32_passes = 1;
    p.time.moe_passes = TT "torchtitan/models/common/token_dispatcher.py:616-619 (fp32 score multiply), moe.py:291-292 "
                           "(router gate under fp32 autocast)";
    p.time.moe_alltoall = TT "torchtitan/models/common/token_dispatcher.py:245-370 (token-count exchange, then "
                             "all_to_all_single dispatch and combine, synchronous: no overlap)";
    p.time.reduce_buckets = ReduceBuckets::kPerLayer;
    p.time.reduce_bucket = TT "torchtitan/distributed/fsdp.py:267-368 (fully_shard per transformer block: one "
                              "reduce-scatter and one all-gather of each block's parameters)";
    p.terms = TermSources{
        8,
        TT "torchtitan/hf_datasets/text_datasets.py:49-58 (np.int64 input_ids, labels)",
        TT "torchtitan/models/common/decoder.py:254-255, 291-298 (norm, then lm_head: nn.Linear saves its input)",
        TT "torchtitan/distributed/pipeline_parallel.py:625 (PipelineStage); pytorch/pytorch@01386103 "
           "torch/distributed/pipelining/stage.py (get_fwd_send_ops / get_bwd_send_ops: isend of the stage's outputs "
           "and input gradients)",
        "JUDGEMENT: a tied embedding's two pipeline copies sum their gradients after the last micro-batch, as "
        "Megatron-LM does (finalize_model_grads.py:164-203); torchtitan's Llama does not tie",
        TT "torchtitan/models/common/decoder_sharding.py:358-367 (tok_embeddings: a Partial output reduced to the "
           "activation layout, Shard(1) with sequence parallelism); no embedding dropout in its models"};
    return p;
  }();
  return p;
}

}  // namespace paraplan
