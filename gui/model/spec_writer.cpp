#include "gui/model/spec_writer.hpp"

#include <yaml-cpp/yaml.h>

#include <limits>

namespace paraplan::gui {

namespace {

void model_map(YAML::Emitter& e, const Model& m) {
  e << YAML::BeginMap;
  e << YAML::Key << "name" << YAML::Value << m.name;
  if (!m.source.empty()) e << YAML::Key << "source" << YAML::Value << m.source;
  e << YAML::Key << "num_layers" << YAML::Value << m.num_layers;
  e << YAML::Key << "hidden_size" << YAML::Value << m.hidden_size;
  e << YAML::Key << "num_attention_heads" << YAML::Value << m.num_attention_heads;
  e << YAML::Key << "num_kv_heads" << YAML::Value << m.num_kv_heads;
  e << YAML::Key << "head_dim" << YAML::Value << m.head_dim;
  e << YAML::Key << "ffn_hidden_size" << YAML::Value << m.ffn_hidden_size;
  e << YAML::Key << "vocab_size" << YAML::Value << m.vocab_size;
  e << YAML::Key << "activation" << YAML::Value << activation_name(m.activation);
  e << YAML::Key << "normalization" << YAML::Value << normalization_name(m.normalization);
  e << YAML::Key << "tie_embeddings" << YAML::Value << m.tie_embeddings;
  e << YAML::Key << "bias" << YAML::Value << m.bias;
  e << YAML::Key << "qkv_bias" << YAML::Value << m.qkv_bias;
  if (m.post_norms) e << YAML::Key << "post_norms" << YAML::Value << true;
  e << YAML::Key << "position_embedding" << YAML::Value << position_embedding_name(m.position_embedding);
  if (m.max_position_embeddings > 0)
    e << YAML::Key << "max_position_embeddings" << YAML::Value << m.max_position_embeddings;
  e << YAML::Key << "hidden_dropout" << YAML::Value << m.hidden_dropout;
  e << YAML::Key << "attention_dropout" << YAML::Value << m.attention_dropout;
  if (m.published_params > 0) e << YAML::Key << "published_params" << YAML::Value << m.published_params;
  e << YAML::EndMap;
}

// nccl_channels: the intra-node link's key only (0: leave it out).
void link_map(YAML::Emitter& e, const Link& l, double efficiency, int nccl_channels = 0) {
  e << YAML::BeginMap;
  e << YAML::Key << "bandwidth_gbs" << YAML::Value << l.bandwidth_gbs;
  e << YAML::Key << "latency_us" << YAML::Value << l.latency_us;
  e << YAML::Key << "efficiency" << YAML::Value << efficiency;
  if (nccl_channels > 0) e << YAML::Key << "nccl_channels" << YAML::Value << nccl_channels;
  e << YAML::EndMap;
}

void cluster_map(YAML::Emitter& e, const Cluster& c) {
  e << YAML::BeginMap;
  e << YAML::Key << "name" << YAML::Value << c.name;
  if (!c.source.empty()) e << YAML::Key << "source" << YAML::Value << c.source;
  e << YAML::Key << "gpu" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "name" << YAML::Value << c.gpu.name;
  e << YAML::Key << "memory_gib" << YAML::Value << c.gpu.memory_gib;
  e << YAML::Key << "peak_tflops_bf16" << YAML::Value << c.gpu.peak_tflops_bf16;
  if (c.gpu.peak_tflops_fp8 > 0) e << YAML::Key << "peak_tflops_fp8" << YAML::Value << c.gpu.peak_tflops_fp8;
  e << YAML::Key << "hbm_bandwidth_gbs" << YAML::Value << c.gpu.hbm_bandwidth_gbs;
  if (c.gpu.sm_count > 0) e << YAML::Key << "sm_count" << YAML::Value << c.gpu.sm_count;
  if (c.gpu.flash_attention.n > 0) {
    const AttentionTable& t = c.gpu.flash_attention;
    auto row = [&](const char* key, const double* v) {
      e << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (int i = 0; i < t.n; ++i) e << v[i];
      e << YAML::EndSeq;
    };
    e << YAML::Key << "flash_attention_tflops" << YAML::Value << YAML::BeginMap;
    row("seq_lengths", t.seq);
    row("head_dim_64", t.tflops_hd64);
    row("head_dim_128", t.tflops_hd128);
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  e << YAML::Key << "gpus_per_node" << YAML::Value << c.gpus_per_node;
  e << YAML::Key << "intra_node" << YAML::Value;
  link_map(e, c.intra_node, c.intra_comm_efficiency, c.nccl_channels);
  e << YAML::Key << "inter_node" << YAML::Value;
  link_map(e, c.inter_node, c.inter_comm_efficiency);
  if (!c.runtime_modelled()) e << YAML::Key << "runtime_overhead_gib" << YAML::Value << c.runtime_overhead_gib;
  if (!c.fragmentation_modelled()) e << YAML::Key << "fragmentation" << YAML::Value << c.fragmentation;
  e << YAML::Key << "cuda_context_gib" << YAML::Value << c.cuda_context_gib;
  e << YAML::Key << "cublas_workspace_mib" << YAML::Value << c.cublas_workspace_mib;
  e << YAML::Key << "te_cublas_workspace_mib" << YAML::Value << c.te_cublas_workspace_mib;
  e << YAML::Key << "nccl_comm_mib" << YAML::Value << c.nccl_comm_mib;
  e << YAML::Key << "gemm_efficiency" << YAML::Value << c.gemm_efficiency;
  if (c.gemm_k_overhead > 0) e << YAML::Key << "gemm_k_overhead" << YAML::Value << c.gemm_k_overhead;
  if (c.gemm_fixed_us > 0) e << YAML::Key << "gemm_fixed_us" << YAML::Value << c.gemm_fixed_us;
  if (c.gemm_efficiency_fp8 > 0) e << YAML::Key << "gemm_efficiency_fp8" << YAML::Value << c.gemm_efficiency_fp8;
  e << YAML::Key << "hbm_efficiency" << YAML::Value << c.hbm_efficiency;
  if (c.strided_hbm_efficiency > 0)
    e << YAML::Key << "strided_hbm_efficiency" << YAML::Value << c.strided_hbm_efficiency;
  e << YAML::Key << "flash_attention_dropout_slowdown" << YAML::Value << c.flash_dropout_slowdown;
  e << YAML::Key << "flash_attention_deterministic_slowdown" << YAML::Value << c.flash_deterministic_slowdown;
  if (c.attention_efficiency > 0) e << YAML::Key << "attention_efficiency" << YAML::Value << c.attention_efficiency;
  if (c.optimizer_efficiency > 0) e << YAML::Key << "optimizer_efficiency" << YAML::Value << c.optimizer_efficiency;
  if (c.best_published_mfu > 0) e << YAML::Key << "best_published_mfu" << YAML::Value << c.best_published_mfu;
  if (c.best_published_mfu_fp8 > 0)
    e << YAML::Key << "best_published_mfu_fp8" << YAML::Value << c.best_published_mfu_fp8;
  e << YAML::EndMap;
}

template <class T, class Name>
void list(YAML::Emitter& e, const char* key, const std::vector<T>& v, Name name) {
  if (v.empty()) return;
  e << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const T& x : v) e << name(x);
  e << YAML::EndSeq;
}

}  // namespace

std::string spec_to_yaml(const Spec& s) {
  YAML::Emitter e;
  e.SetDoublePrecision(std::numeric_limits<double>::max_digits10);
  e << YAML::BeginMap;
  e << YAML::Key << "model" << YAML::Value;
  model_map(e, s.model);
  e << YAML::Key << "cluster" << YAML::Value;
  cluster_map(e, s.cluster);
  e << YAML::Key << "num_nodes" << YAML::Value << s.num_nodes;
  const Training& t = s.training;
  e << YAML::Key << "training" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "framework" << YAML::Value << framework_name(t.framework);
  e << YAML::Key << "seq_length" << YAML::Value << t.seq_length;
  e << YAML::Key << "global_batch_size" << YAML::Value << t.global_batch_size;
  e << YAML::Key << "precision" << YAML::Value << dtype_name(t.precision);
  // Only when the spec gave them: otherwise they follow the precision and the
  // framework (Megatron's main_grad is fp32 unless bf16 is asked for).
  if (t.grad_dtype_given) e << YAML::Key << "grad_dtype" << YAML::Value << dtype_name(t.grad_dtype);
  e << YAML::Key << "optimizer" << YAML::Value << optimizer_name(t.optimizer);
  e << YAML::Key << "optimizer_state_bytes" << YAML::Value << t.optimizer_state_bytes;
  e << YAML::Key << "flash_attention" << YAML::Value << t.flash_attention;
  if (t.grad_bucket_params_given) e << YAML::Key << "grad_bucket_params" << YAML::Value << t.grad_bucket_params;
  e << YAML::Key << "overlap_dp_comm" << YAML::Value << t.overlap_dp_comm;
  if (!t.overlap_param_gather) e << YAML::Key << "overlap_param_gather" << YAML::Value << false;
  if (t.fp8) e << YAML::Key << "fp8" << YAML::Value << true;
  if (t.fp8_param_gather) e << YAML::Key << "fp8_param_gather" << YAML::Value << true;
  if (t.pipeline_scatter_gather) e << YAML::Key << "pipeline_scatter_gather" << YAML::Value << true;
  if (!t.gradient_accumulation_fusion) e << YAML::Key << "gradient_accumulation_fusion" << YAML::Value << false;
  if (t.cross_entropy_fusion) e << YAML::Key << "cross_entropy_fusion" << YAML::Value << true;
  if (t.tp_comm_overlap) e << YAML::Key << "tp_comm_overlap" << YAML::Value << true;
  if (!t.tp_async_allreduce) e << YAML::Key << "tp_async_allreduce" << YAML::Value << false;
  if (!t.overlap_p2p_comm) e << YAML::Key << "overlap_p2p_comm" << YAML::Value << false;
  if (t.overlap_p2p_comm_warmup_flush) e << YAML::Key << "overlap_p2p_comm_warmup_flush" << YAML::Value << true;
  if (t.deterministic) e << YAML::Key << "deterministic" << YAML::Value << true;
  if (t.grad_reduce_dtype_given) e << YAML::Key << "grad_reduce_dtype" << YAML::Value << dtype_name(t.grad_reduce_dtype);
  e << YAML::EndMap;
  e << YAML::Key << "memory_headroom" << YAML::Value << s.memory_headroom;
  const SearchSpace& q = s.search;
  const bool any = !q.dp.empty() || !q.tp.empty() || !q.cp.empty() || !q.pp.empty() || !q.vpp.empty() ||
                   !q.zero.empty() || !q.mbs.empty() || !q.recompute.empty() || !q.sp.empty() ||
                   !q.schedule.empty() || q.allow_tp_across_nodes;
  if (any) {
    const auto id = [](int x) { return x; };
    e << YAML::Key << "search" << YAML::Value << YAML::BeginMap;
    list(e, "dp", q.dp, id);
    list(e, "tp", q.tp, id);
    list(e, "cp", q.cp, id);
    list(e, "pp", q.pp, id);
    list(e, "vpp", q.vpp, id);
    list(e, "sp", q.sp, id);
    list(e, "zero", q.zero, id);
    list(e, "mbs", q.mbs, id);
    list(e, "recompute", q.recompute, [](Recompute r) { return recompute_name(r); });
    list(e, "schedule", q.schedule, [](Schedule x) { return schedule_name(x); });
    if (q.allow_tp_across_nodes) e << YAML::Key << "allow_tp_across_nodes" << YAML::Value << true;
    e << YAML::EndMap;
  }
  if (s.default_layout) e << YAML::Key << "layout" << YAML::Value << *s.default_layout;
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace paraplan::gui
