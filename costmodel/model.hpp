// The world model: a decoder-only transformer, the cluster it runs on and the
// training set-up. Plain structs, validated once at load time (planner/spec_*).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace paraplan {

// kGeglu: the gated GeLU MLP of Gemma (gelu_pytorch_tanh(gate) * up, 3 matrices).
// kRelu2: squared ReLU, relu(x)^2, in a plain (not gated) MLP: Nemotron's
// (NVIDIA/Megatron-LM@d98e8a64 megatron/core/activations.py:9-11, --squared-relu;
// HuggingFace hidden_act "relu2").
enum class Activation { kGelu, kSwiglu, kGeglu, kRelu2 };
enum class Normalization { kLayerNorm, kRmsNorm };
enum class PositionEmbedding { kRope, kLearned };
enum class DType { kBf16, kFp16, kFp32 };
enum class OptimizerKind { kAdam, kSgd };
// The training stack whose memory accounting a prediction follows
// (costmodel/frameworks/): Megatron-LM (the default), DeepSpeed, PyTorch
// FSDP2/torchtitan, nanotron, or paraplan's own executor (what validate runs).
enum class Framework { kMegatron, kDeepSpeed, kFsdp, kNanotron, kParaplan };
inline constexpr int kNumFrameworks = 5;

struct Model {
  std::string name;
  std::string source;
  int num_layers = 0;
  int hidden_size = 0;
  int num_attention_heads = 0;
  int num_kv_heads = 0;  // == num_attention_heads for MHA
  int head_dim = 0;      // hidden_size / num_attention_heads unless the config says otherwise
  int ffn_hidden_size = 0;
  int vocab_size = 0;
  Activation activation = Activation::kGelu;
  Normalization normalization = Normalization::kLayerNorm;
  bool tie_embeddings = false;
  bool bias = false;      // biases on every linear layer
  bool qkv_bias = false;  // bias on the QKV projection only (Qwen2)
  // Gemma-2/3: a norm after attention and after the MLP too (post_attention_
  // and post_feedforward_layernorm), 4 per layer.
  bool post_norms = false;
  // Qwen3: an RMSNorm of head_dim on every query and key head (q_norm, k_norm).
  bool qk_norm = false;
  // Architecture keys paraplan reads but does not model in memory or time
  // (HF config: soft-capping, sliding windows), each "key: what is not modelled".
  std::vector<std::string> caveats;
  // A Mamba-2 hybrid (Megatron-LM's hybrid_override_pattern, HF NemotronH): one character per layer, M a
  // Mamba-2 mixer, * attention, - an MLP, E a mixture of experts, each behind its own pre-norm
  // (NVIDIA/Megatron-LM@d98e8a64 megatron/core/models/mamba/mamba_model.py; transformers
  // models/nemotron_h/modeling_nemotron_h.py NemotronHBlock). Empty: every layer is attention + MLP.
  // Counted (count_params); its memory and time are not modelled yet, so planning refuses it
  // (refuse_unplanned, planner/catalog.cpp).
  std::string hybrid_pattern;
  // The Mamba-2 mixer (NemotronHMamba2Mixer / Megatron's MambaMixer): heads x head_dim channels (expand x h),
  // n_groups groups of B and C of ssm_state_size each, a causal depthwise conv of conv_kernel taps.
  int mamba_heads = 0, mamba_head_dim = 0, mamba_state = 0, mamba_groups = 1, mamba_conv_kernel = 4;
  bool mamba_conv_bias = true, mamba_proj_bias = false;
  bool hybrid() const { return !hybrid_pattern.empty(); }
  PositionEmbedding position_embedding = PositionEmbedding::kRope;
  int max_position_embeddings = 0;
  double hidden_dropout = 0.0;
  double attention_dropout = 0.0;
  std::int64_t published_params = 0;  // 0 = not given

  // Mixture of experts (issue 16): counted (count_params) and modelled in
  // memory and time as Megatron-core runs them (layout ep, etp).
  int num_experts = 0;          // routed experts per MoE layer; 0 = dense
  int experts_per_token = 0;    // top-k routed experts per token
  int moe_ffn_hidden_size = 0;  // one routed (and shared) expert's FFN width
  int num_shared_experts = 0;   // DeepSeek: experts every token goes through, of moe_ffn_hidden_size
  int first_dense_layers = 0;   // DeepSeek first_k_dense_replace: layers before the first MoE layer
  int moe_layer_freq = 1;       // layer i >= first_dense_layers is MoE when i % moe_layer_freq == 0
  bool router_bias = false;     // DeepSeek-V3's e_score_correction_bias, one per routed expert
  bool shared_expert_gate = false;  // Qwen2-MoE: a sigmoid gate Linear(h, 1) on the shared expert's output
  // Multi-latent attention (DeepSeek-V2/V3); kv_lora_rank 0 = standard attention.
  int q_lora_rank = 0;  // 0: queries projected directly
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  int mtp_layers = 0;  // DeepSeek-V3 multi-token-prediction modules (counted apart)

  std::int64_t q_width() const { return std::int64_t(num_attention_heads) * head_dim; }
  std::int64_t kv_width() const { return std::int64_t(num_kv_heads) * head_dim; }
  // Width of the first MLP GEMM's output: gate and up for SwiGLU.
  std::int64_t ffn_in_width() const { return gated() ? 2 * std::int64_t(ffn_hidden_size) : ffn_hidden_size; }
  // A gated MLP (SwiGLU, GeGLU): gate and up projections, then down.
  bool gated() const { return activation == Activation::kSwiglu || activation == Activation::kGeglu; }
  // Norms per layer: 2 (before attention and MLP), 4 with Gemma-2's post-norms.
  int norms_per_layer() const { return post_norms ? 4 : 2; }
  bool has_qkv_bias() const { return bias || qkv_bias; }
  bool is_moe() const { return num_experts > 0; }
  bool mla() const { return kv_lora_rank > 0; }
  // HF modeling_deepseek.py DeepseekV3DecoderLayer: MoE from first_k_dense_replace on, every moe_layer_freq-th.
  bool is_moe_layer(int layer) const {
    return is_moe() && layer >= first_dense_layers && layer % std::max(1, moe_layer_freq) == 0;
  }
};

struct Link {
  double bandwidth_gbs = 0;  // per GPU per direction, GB/s (1e9 B/s)
  double latency_us = 0;
  // As a datasheet says it (inter_node: nics_per_node, nic_gbps), when the
  // spec gave it so: bandwidth_gbs = nics x Gb/s / 8 / GPUs per node. 0 = not given.
  int nics_per_node = 0;
  double nic_gbps = 0;
};

// Measured attention-kernel throughput of a GPU: fused (flash) attention,
// causal, forward + backward, in TFLOP/s counting the causal half of the s²
// products (the FlashAttention benchmark's convention), at each sequence length
// for head dimensions 64 and 128 (Dao 2023, FlashAttention-2, Figs. 6-7: the
// repository's assets/flash2_*_fwd_bwd_benchmark.png). n = 0: none given.
struct AttentionTable {
  static constexpr int kMax = 8;
  int n = 0;
  double seq[kMax] = {};
  double tflops_hd64[kMax] = {};
  double tflops_hd128[kMax] = {};
  // TFLOP/s at sequence length s and head dimension d: log-linear in s between
  // the measured points, linear in d between 64 and 128, clamped outside both.
  double at(double s, double d) const;
};

struct Gpu {
  std::string name;
  double memory_gib = 0;
  // The dense 16-bit tensor-core peak: BF16, or FP16 where the GPU has no BF16.
  double peak_tflops_bf16 = 0;
  double peak_tflops_fp8 = 0;  // dense FP8 tensor-core peak; 0 = the GPU has no FP8
  // Whether the GPU computes in BF16 (gpu.bf16; Volta and Turing do not): a
  // run on one without trains in fp16 or fp32.
  bool bf16 = true;
  double hbm_bandwidth_gbs = 0;
  // Streaming multiprocessors (gpu.sm_count): the waves a GEMM's tiles run
  // in. 0 = not given (no quantization).
  int sm_count = 0;
  AttentionTable flash_attention;  // gpu.flash_attention_tflops
};

struct Cluster {
  std::string name;
  std::string source;
  Gpu gpu;
  int gpus_per_node = 0;
  Link intra_node;
  Link inter_node;
  // Memory outside the tensors. < 0: not given, so modelled (costmodel/memory.cpp):
  // runtime from the CUDA context, NCCL buffers per communicator and cuBLAS
  // workspaces; fragmentation from the caching allocator's rounding and the
  // blocks it strands. Given: a flat GiB and a fraction of tensor bytes.
  double runtime_overhead_gib = -1;
  double fragmentation = -1;
  bool runtime_modelled() const { return runtime_overhead_gib < 0; }
  bool fragmentation_modelled() const { return fragmentation < 0; }
  // The modelled runtime's parts (cluster keys; defaults are JUDGEMENT from
  // FACTS.md "Overheads", see configs/clusters/README or docs/frameworks.md):
  // CUDA context with lazy module loading, ~0.3-0.5 GiB (pytorch#107667, PR #86509).
  double cuda_context_gib = 0.5;
  // PyTorch's cuBLAS workspace per handle and stream: 32 MiB on sm90
  // (CublasHandlePool.cpp), + 1 MiB cuBLASLt; inside the caching allocator.
  double cublas_workspace_mib = 33;
  // Transformer Engine's own cuBLAS workspace per GEMM stream, allocated once
  // through PyTorch's allocator and kept (lru_cache): 32 MiB + 1 KiB on
  // compute capability 9.0 and later, 4 MiB before (NVIDIA/TransformerEngine@d0067d0d
  // transformer_engine/pytorch/cpp_extensions/gemm.py:40-67).
  double te_cublas_workspace_mib = 32 + 1.0 / 1024;
  // NCCL buffers per communicator: 16 channels x 2 ring peers x (Simple
  // 4 MiB + LL 0.5 MiB + LL128 4.6875 MiB) = 294 MiB (nccl src/init.cc:810-828,
  // src/include/device.h; channel count and peers per rank: JUDGEMENT).
  double nccl_comm_mib = 294;
  // Channels of an NCCL collective on this node type, each one CTA on one SM
  // of the GPU for as long as the collective runs (cluster key
  // intra_node.nccl_channels): the SMs an overlapped collective takes from the
  // compute beside it (costmodel/time.cpp overlap_contention). 16: NCCL's
  // NVLS channel count on sm90 (nccl src/transport/nvls.cc:155), the default.
  static constexpr int kDefaultNcclChannels = 16;
  int nccl_channels = kDefaultNcclChannels;
  // Achievable fractions of the line rates above, used by the time model
  // (costmodel/time.cpp, comm.cpp); JUDGEMENT defaults, meant to be calibrated.
  // Large bf16 GEMMs reach ~70-80% of dense peak in public cuBLAS benchmarks
  // (e.g. 8192^3 on B200: 1610 of 2250 TFLOP/s, pyptx.dev/performance); the
  // cap stays above end-to-end MFU (Megatron-LM README: up to 47% on H100).
  double gemm_efficiency = 0.75;
  // GEMM time by shape (cluster keys; 0 = off, the flat cap above): each
  // output tile's k-loop pays a fixed prologue/epilogue worth gemm_k_overhead
  // elements of k (compute x (1 + k0/k)), and every GEMM kernel a fixed
  // gemm_fixed_us (launch, first wave's ramp, tail). Fitted per GPU to a
  // published table of measured GEMMs (configs/clusters/dgx-h100.yaml).
  double gemm_k_overhead = 0;
  double gemm_fixed_us = 0;
  // Of the FP8 peak for FP8 GEMMs; 0: gemm_efficiency.
  double gemm_efficiency_fp8 = 0;
  double gemm_eff_fp8() const { return gemm_efficiency_fp8 > 0 ? gemm_efficiency_fp8 : gemm_efficiency; }
  // Of the HBM bandwidth for memory-bound (elementwise, norm, softmax,
  // optimizer) kernels: JUDGEMENT, copy-like kernels sustain ~80-90% of the
  // datasheet HBM bandwidth; not measured here.
  double hbm_efficiency = 0.8;
  // Of the HBM bandwidth for PyTorch's elementwise kernels over strided
  // (non-contiguous) operands, which run unvectorized
  // (TimeVariant::strided_layer_ops); 0: hbm_efficiency.
  double strided_hbm_efficiency = 0;
  double strided_hbm_eff() const { return strided_hbm_efficiency > 0 ? strided_hbm_efficiency : hbm_efficiency; }
  // Flash attention with attention dropout (p > 0) over the same kernel
  // without: the dropout mask drawn from Philox inside the kernel, forward
  // and backward. MEASURED on an H100 80GB HBM3 (FlashAttention-2 through
  // PyTorch 2.11's SDPA, causal [2, 8, 8192, 128], dropout 0.1: 4.082 ms
  // against 3.521 ms, tests/data/measurements/h100-attention-variants.csv);
  // other GPUs: the same ratio (JUDGEMENT) unless the cluster gives its own.
  double flash_dropout_slowdown = 4.0816950 / 3.5209899;
  // The same kernel with deterministic algorithms (Training::deterministic):
  // FlashAttention-2's backward accumulates dQ in a fixed order. MEASURED on
  // the same H100 and shape: 3.636 ms against 3.521 ms (with dropout 0.1:
  // 4.199 against 4.082, the same 3 %); other GPUs the same ratio (JUDGEMENT).
  double flash_deterministic_slowdown = 3.6357954 / 3.5209899;
  // Of peak for the attention core's matrix products (QK^T, PV and their
  // gradients, fused as flash attention or not), which run below large GEMMs
  // (FlashAttention-2 reports 50-73% of peak on A100, Dao 2023). 0: the same
  // as gemm_efficiency (the default; `paraplan calibrate` fits it).
  double attention_efficiency = 0;
  double attention_eff() const { return attention_efficiency > 0 ? attention_efficiency : gemm_efficiency; }
  // Of the HBM bandwidth for the optimizer step (one fused streaming pass over
  // gradients, state and weights, e.g. apex/PyTorch multi-tensor Adam), which
  // can run nearer the copy rate than norms and activations do. 0: the same as
  // hbm_efficiency (the default; `paraplan calibrate` fits it).
  double optimizer_efficiency = 0;
  double optimizer_eff() const { return optimizer_efficiency > 0 ? optimizer_efficiency : hbm_efficiency; }
  // nccl-tests busbw / line rate: 8xH100 NVSwitch all-reduce ~370 of 450 GB/s
  // (nccl-tests#212, FACTS.md) = 0.82; one 400 Gb/s NDR NIC ~47 of 50 GB/s
  // (nccl-tests#290, FACTS.md) = 0.94.
  double intra_comm_efficiency = 0.82;
  double inter_comm_efficiency = 0.94;
  // The best model-FLOPs utilization published for this GPU in real training
  // (cluster key best_published_mfu, with its source); a prediction above it
  // carries a warning. 0 = not given. FP8 training (Training::fp8) is held
  // to best_published_mfu_fp8 instead, still counted against the BF16 peak
  // (as Megatron-LM and NeMo report FP8 runs); without it an FP8 prediction
  // carries no MFU warning.
  double best_published_mfu = 0;
  double best_published_mfu_fp8 = 0;
};

struct Training {
  Framework framework = Framework::kMegatron;
  int seq_length = 0;
  int global_batch_size = 0;  // sequences per optimizer step
  // False when the spec left them out and the loader chose (planner/spec_inputs.hpp defaults).
  bool seq_length_given = true, global_batch_size_given = true;
  DType precision = DType::kBf16;
  DType grad_dtype = DType::kBf16;
  // Whether the spec set training.precision (else the loader chose: bf16, or
  // fp16 on a GPU without BF16).
  bool precision_given = false;
  OptimizerKind optimizer = OptimizerKind::kAdam;
  bool optimizer_given = false;  // a launch configuration named it (DeepSpeed's optimizer.type): no default
  double optimizer_state_bytes = 12;  // bytes per parameter of optimizer state
  // Whether the spec set these; when not, they follow the precision
  // (set_precision), e.g. when Megatron's --bf16 overrides an fp32 spec.
  bool grad_dtype_given = false;
  bool optimizer_state_bytes_given = false;
  bool flash_attention = false;
  std::int64_t grad_bucket_params = 40'000'000;  // ZeRO-2/3 reduce bucket (Megatron DDP default 40M)
  bool grad_bucket_params_given = false;         // else the framework's default bucket
  // DP/ZeRO communication overlaps compute (Megatron --overlap-grad-reduce and
  // --overlap-param-gather, DeepSpeed prefetch). false: it all adds to the step
  // (plain PyTorch DDP without buckets, or paraplan's own executors).
  bool overlap_dp_comm = true;
  // With overlap_dp_comm, ZeRO-1/2's parameter all-gather after the optimizer
  // step also runs beside the next forward where the framework can do so
  // (Megatron --overlap-param-gather; TimeVariant::param_gather_overlaps_forward).
  bool overlap_param_gather = true;
  // FP8 training with Transformer Engine (Megatron --fp8-format): the linear
  // layers' GEMMs in FP8, their saved inputs in 1 byte, FP8 weight workspaces.
  bool fp8 = false;
  // --fp8-param-gather: FP8 primary weights (no bf16 copy), gathered in FP8.
  bool fp8_param_gather = false;
  int fp8_amax_history_len = 1;  // Megatron --fp8-amax-history-len (default 1)
  // Megatron's scatter-gather pipeline sends (Narayanan et al. 2021 §4.1): without
  // sequence parallelism each tp rank sends 1/tp of the replicated s·b·h
  // activation and the receiving stage all-gathers it over NVLink. Megatron-LM
  // did this by default from 27fc468964 (2021-01-20, megatron/p2p_communication.py)
  // until 39b83c7953 (2023-01-31) moved the pipeline into megatron/core without
  // it (the flag --no-scatter-gather-tensors-in-pipeline stayed unused until
  // 10e7b74597 removed it); today's Megatron sends the whole tensor. false: whole.
  bool pipeline_scatter_gather = false;
  // Megatron's gradient-accumulation fusion (on unless
  // --no-gradient-accumulation-fusion): the weight-gradient GEMM accumulates
  // into the fp32 main_grad; off, a separate add pass follows every backward.
  bool gradient_accumulation_fusion = true;
  // Megatron --cross-entropy-loss-fusion: the vocab-parallel cross-entropy in
  // fused kernels (fewer passes over the fp32 logits; same tensors kept).
  bool cross_entropy_fusion = false;
  // Megatron --transformer-impl transformer_engine (the default,
  // transformer_config.py:1314-1316) or local: Megatron-core's own modules,
  // whose core attention is the unfused DotProductAttention
  // (megatron/core/models/backends.py:129-131) and whose GEMMs keep no
  // Transformer Engine workspaces (Profile::te_workspaces).
  bool transformer_engine = true;
  // Megatron --moe-grouped-gemm (default off, transformer_config.py:850): the
  // local experts run as Transformer Engine grouped GEMMs (TEGroupedMLP), which
  // keep a cuBLAS workspace per compute stream; off, one TE linear per expert.
  bool moe_grouped_gemm = false;
  // Megatron --moe-token-dispatcher-type (transformer_config.py:891 at d98e8a64; the default there is
  // allgather). kAllToAll: the all-to-all dispatcher (token_dispatcher.py:682-900), what paraplan's search
  // and --emit megatron use. kAllGather: every token of the etp x ep group all-gathered to every rank of it,
  // the combine reduce-scattered in fp32 (token_dispatcher.py:233-372), the gathered tokens in Megatron's
  // persistent "mpu" buffer (tensor_parallel/mappings.py:142-150).
  enum class MoeDispatcher { kAllToAll, kAllGather };
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  // Megatron --overlap-moe-expert-parallel-comm (model_parallel_config.py:343, default off): the combined
  // 1F1B schedule runs one micro-batch's forward beside another's backward, layer by layer, so each
  // layer's expert all-to-alls run beside the other micro-batch's compute (combined_1f1b.py:35-110).
  bool moe_ep_overlap = false;
  // DeepSpeed ZeRO-3's parameter prefetch (zero_optimization.stage3_prefetch_bucket_size, default 5e7
  // elements) and cap on gathered parameters (stage3_max_live_parameters, 1e9): deepspeed/runtime/zero/
  // config.py:215, 238 @edaa7221. Only the deepspeed profile reads them (Profile::gathered_by_prefetch_bucket).
  std::int64_t zero3_prefetch_bucket_size = 50'000'000;
  std::int64_t zero3_max_live_parameters = 1'000'000'000;
  // stage3_max_reuse_distance (config.py:244, 1e9): a module's parameters are not released while they are used
  // again within this many elements of the trace (partitioned_param_coordinator.py:653-665). At the turn from
  // forward to backward the last modules' are (their reuse is twice the parameters after them away).
  std::int64_t zero3_max_reuse_distance = 1'000'000'000;
  // DeepSpeed ZeRO-1/2's allgather_bucket_size (zero/config.py:132, 5e8): the post-step parameter all-gather's
  // buckets (stage_1_and_2.py:2394-2401); 0: the reduce bucket's.
  std::int64_t gather_bucket_params = 0;
  // Megatron --mtp-num-layers: the model's multi-token-prediction modules
  // (Model::mtp_layers) are trained, on the last pipeline rank with a copy of
  // the word embedding there (NVIDIA/Megatron-LM@d98e8a64
  // megatron/core/models/gpt/gpt_model.py:166-181, 244-250; only when the flag
  // is given, megatron/training/models/gpt.py:414). false: the modules are
  // counted apart and not built.
  bool mtp = false;
  // Megatron --tp-comm-overlap (Transformer Engine userbuffers, needs SP):
  // every TP all-gather and reduce-scatter pipelined with the GEMM beside it.
  bool tp_comm_overlap = false;
  // Without SP, the column-parallel linear's input-gradient all-reduce runs
  // beside its weight-gradient GEMM (async, the framework's TimeVariant::
  // tp_backward_overlap). false: in line, after the input-gradient GEMM, as
  // Megatron-LM ran it until the async all-reduce arrived (NVIDIA/Megatron-LM
  // 3f652469, 2021-09-02; before it megatron/mpu/mappings.py:88-89 @de7dc40f,
  // _CopyToModelParallelRegion.backward: _reduce(grad_output)) and with
  // --no-async-tensor-model-parallel-allreduce until cf547dea (2023-11).
  bool tp_async_allreduce = true;
  // Megatron --overlap-p2p-communication (on unless --no-overlap-p2p-communication, only with
  // interleaving; NVIDIA/Megatron-LM 4eeff55d1f, 2023-10, made it the default): the interleaved
  // schedule's steady-phase pipeline sends run beside compute (TimeVariant::p2p_overlaps_interleaved).
  // false: in line, as Megatron-LM ran them before (megatron/p2p_communication.py:126-130 @de7dc40f).
  bool overlap_p2p_comm = true;
  // Megatron --overlap-p2p-communication-warmup-flush (off by default; needs the overlap above): the
  // warm-up's forward sends run beside the next forward chunk and the cool-down's backward sends beside the
  // next backward chunk too (megatron/core/pipeline_parallel/schedules.py:1576-1606 @d98e8a64).
  bool overlap_p2p_comm_warmup_flush = false;
  // Deterministic algorithms (Megatron --deterministic-mode:
  // torch.use_deterministic_algorithms(True), NVTE_ALLOW_NONDETERMINISTIC_ALGO=0,
  // NVIDIA/Megatron-LM@d98e8a64 megatron/training/determinism.py): flash
  // attention's backward in its deterministic variant
  // (Cluster::flash_deterministic_slowdown).
  bool deterministic = false;
  // The dtype the data-parallel gradient reduction moves, where the spec or the
  // framework's config sets it apart from the accumulation dtype (DeepSpeed
  // communication_data_type); otherwise the framework's rule (grad_reduce_bytes).
  DType grad_reduce_dtype = DType::kFp32;
  bool grad_reduce_dtype_given = false;
  // Mixtures of experts: the busiest expert rank's tokens over the mean (the
  // expert GEMMs and all-to-alls wait for it). JUDGEMENT default 1.25: the
  // capacity factor at which Switch Transformer drops few tokens (Fedus,
  // Zoph, Shazeer 2022, JMLR 23, "Switch Transformers", §2.2), i.e. the
  // headroom a well-balanced router needs over perfect balance.
  double moe_load_imbalance = 1.25;
  // Megatron --moe-expert-capacity-factor (0: dropless, the default): an
  // expert keeps at most capacity x its mean share of tokens and drops the
  // rest; with --moe-pad-expert-input-to-capacity every expert's input is
  // padded to exactly that. NVIDIA/Megatron-LM@d98e8a64 moe/router.py:793-801
  // (apply_router_token_dropping), moe_utils.py:248-265 (capacity = ceil(tokens /
  // experts x factor)), token_dispatcher.py:446 (drop_and_pad).
  double moe_capacity_factor = 0;
  bool moe_pad_to_capacity = false;
  // The busiest expert rank's rows over the balanced mean, what the expert
  // GEMMs, the all-to-alls and the dispatched-token memory are sized by:
  // padded, the capacity; with drops, the imbalance capped by it; dropless,
  // the imbalance.
  double moe_expert_load() const {
    if (moe_capacity_factor > 0)
      return moe_pad_to_capacity ? moe_capacity_factor
                                 : (moe_load_imbalance < moe_capacity_factor ? moe_load_imbalance : moe_capacity_factor);
    return moe_load_imbalance;
  }
  // The same on a layout of expert-parallel size ep. With ep = 1 every rank
  // holds every expert and computes exactly its own top-k copies of its
  // tokens however the router spreads them (all of them, or each expert's
  // padded to the capacity): no rank is busier than the mean.
  double moe_expert_load(int ep) const {
    if (ep > 1) return moe_expert_load();
    return moe_capacity_factor > 0 && moe_pad_to_capacity ? moe_capacity_factor : 1.0;
  }
};

// Upper bounds on sizes paraplan models, so that byte counts stay exact in
// 64-bit integers (checked at load time).
inline constexpr int kMaxGpus = 1 << 24;
inline constexpr int kMaxWidth = 1 << 22;  // hidden, q/kv widths, ffn
inline constexpr int kMaxVocab = 1 << 24;
inline constexpr int kMaxLayers = 1 << 16;
inline constexpr int kMaxHeads = 1 << 14;
inline constexpr int kMaxSeq = 1 << 22;
// Floating-point spec values: bounds far past any real machine, so that bytes
// and seconds derived from them stay finite and exact in 64 bits.
inline constexpr double kMaxGpuMemoryGib = 1 << 20;  // 1 PiB per GPU
inline constexpr double kMaxRate = 1e9;              // TFLOP/s or GB/s
inline constexpr double kMaxLatencyUs = 1e9;
inline constexpr double kMaxStateBytesPerParam = 1024;

// The longest sequence a model can take: a learned position table has one row
// per position (GPT-2's n_positions); RoPE and the like have no table.
inline int max_seq_length(const Model& m) {
  return m.position_embedding == PositionEmbedding::kLearned ? m.max_position_embeddings : kMaxSeq;
}
// What a sequence longer than that is told ("expected at most 2048, the
// model's max_position_embeddings (...)"), for the loader, the CLI and the executor.
inline std::string seq_length_limit_message(const Model& m) {
  return "expected at most " + std::to_string(max_seq_length(m)) + ", the model's max_position_embeddings (" +
         m.name + " has one learned position row per token)";
}
inline constexpr int kMaxBatch = 1 << 24;

// Bytes of one element.
constexpr int dtype_bytes(DType t) { return t == DType::kFp32 ? 4 : 2; }
const char* dtype_name(DType t);
const char* activation_name(Activation a);
const char* normalization_name(Normalization n);
const char* position_embedding_name(PositionEmbedding p);
const char* optimizer_name(OptimizerKind o);
const char* framework_name(Framework f);
// "megatron" -> kMegatron; false for an unknown name.
bool parse_framework(const std::string& text, Framework* out);
inline constexpr const char* kFrameworkChoices = "megatron, deepspeed, fsdp, nanotron or paraplan";

// Default optimizer state in bytes/param: Adam keeps fp32 m and v, plus an
// fp32 master copy when training in 16-bit (Rajbhandari et al. 2020, K = 12).
double default_optimizer_state_bytes(OptimizerKind o, DType precision);
// Sets the precision and re-derives the defaults that follow it (gradient
// dtype, optimizer state bytes) unless the spec gave them.
void set_precision(Training* t, DType precision);
// Why a run on GPU g cannot use bf16 ("GPU V100-SXM2-32GB has no BF16 (cluster
// gpu.bf16: false)"), the one wording every refusal uses.
std::string no_bf16_reason(const Gpu& g);

// ---- parameter counts (FACTS.md "Parameter counting rules") ----

// Parameters of one transformer layer, unsharded.
std::int64_t layer_params(const Model& m);
// Token embedding (+ learned positions), unsharded.
std::int64_t embedding_params(const Model& m);
// Output projection (0 when tied to the embedding).
std::int64_t output_params(const Model& m);
std::int64_t final_norm_params(const Model& m);
// The weight matrices of one layer's four linear layers (QKV, out-proj, fc1
// incl. the gate, fc2), no biases: what tensor parallelism splits and what FP8
// quantizes. FACTS: d·H·hd + 2·d·KV·hd + H·hd·d, and 3·d·ffn gated (2 otherwise).
std::int64_t linear_layer_weights(const Model& m);
// All weights of the model (tied embedding counted once; a mixture of experts
// with every expert; without the multi-token-prediction modules).
std::int64_t total_params(const Model& m);

// Counts that hold for mixtures of experts and multi-latent attention too.
struct ParamCounts {
  std::int64_t total = 0;   // == total_params
  std::int64_t active = 0;  // used per token: the top-k routed experts instead of all (== total when dense)
  std::int64_t mtp = 0;     // DeepSeek-V3's multi-token-prediction modules, apart (embedding and head shared)
};
ParamCounts count_params(const Model& m);
// One layer's attention (projections, MLA's low-rank norms, biases), its MLP
// (dense, or every routed + shared expert and the router), and an MoE layer's
// MLP with only the top-k routed experts.
std::int64_t attention_params(const Model& m);
std::int64_t dense_mlp_params(const Model& m);
std::int64_t moe_mlp_params(const Model& m);
std::int64_t moe_mlp_active_params(const Model& m);
// One Mamba-2 mixer: in_proj h -> (d_inner + conv_dim + heads) with conv_dim = d_inner + 2 x groups x state,
// the depthwise conv1d (conv_dim x kernel, + conv_dim bias), dt_bias, A_log and D (heads each), the gated
// RMSNorm (d_inner) and out_proj d_inner -> h (transformers modeling_nemotron_h.py NemotronHMamba2Mixer.__init__;
// Megatron-LM@d98e8a64 megatron/core/ssm/mamba_mixer.py MambaMixer.__init__).
std::int64_t mamba_mixer_params(const Model& m);
// The same in floating point, for bounds checks before any 64-bit product.
double approx_params(const Model& m);
// Parameter counts past this are refused at load time, so that bytes of model
// state (at most 1024 B/param of optimizer state) stay below 2^61.
inline constexpr double kMaxParams = double(std::int64_t(1) << 50);

}  // namespace paraplan
