#include "planner/layout_source.hpp"

#include <cstdlib>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <iterator>
#include <vector>

#include "planner/spec_error.hpp"
#include "planner/spec_loader.hpp"

namespace paraplan {

namespace {

using nlohmann::json;

struct Draft {
  Layout l;
  LayoutFields set;
  std::string source;    // for messages: "--layout", "--megatron-args", a file
  int accumulation = 0;  // DeepSpeed gradient_accumulation_steps without train_batch_size
};

std::vector<std::string> split_args(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  char quote = 0;
  bool have = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
      else cur += c;
    } else if (c == '"' || c == '\'') {
      quote = c, have = true;
    } else if (c == '\\' && i + 1 < s.size() && (s[i + 1] == '\n' || s[i + 1] == '\r')) {
      ++i;  // line continuation
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (have) out.push_back(cur), cur.clear(), have = false;
    } else {
      cur += c, have = true;
    }
  }
  if (have) out.push_back(cur);
  return out;
}

[[noreturn]] void fail(const std::string& src, const std::string& field, const std::string& msg) {
  throw SpecError(src, 0, field, msg);
}

int to_pos_int(const std::string& src, const std::string& flag, const std::string& v, int min_v) {
  int x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < min_v)
    fail(src, flag,
         std::string("expected ") + (min_v > 0 ? "a positive integer" : "an integer >= 0") +
             ", got '" + v + "'");
  return x;
}

int capped_int(const std::string& src, const std::string& flag, const std::string& v, int max) {
  const int x = to_pos_int(src, flag, v, 1);
  if (x > max) fail(src, flag, "expected at most " + std::to_string(max) + ", got " + v);
  return x;
}

#include "planner/megatron_flags.inc"

// The Megatron-LM flags paraplan reads (each changes memory or time).
constexpr const char* kReadMegatronFlags[] = {
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
    "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
    "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split", "--sequence-parallel",
    "--micro-batch-size", "--global-batch-size", "--seq-length", "--use-distributed-optimizer",
    "--recompute-activations", "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
    "--recompute-modules",
    "--checkpoint-activations", "--checkpoint-num-layers", "--activations-checkpoint-method",
    "--activations-checkpoint-num-layers", "--no-async-tensor-model-parallel-allreduce", "--no-overlap-p2p-communication", "--overlap-p2p-communication-warmup-flush", "--deterministic-mode", "--bf16", "--fp16", "--grad-reduce-in-bf16", "--attention-backend",
    "--use-flash-attn", "--overlap-grad-reduce", "--overlap-param-gather", "--context-parallel-size", "--cp-comm-type",
    "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--num-experts", "--moe-router-topk",
    "--moe-ffn-hidden-size", "--mtp-num-layers", "--transformer-impl", "--moe-grouped-gemm", "--microbatch-group-size-per-virtual-pipeline-stage", "--moe-router-force-load-balancing", "--moe-expert-capacity-factor", "--moe-pad-expert-input-to-capacity", "--fp8-format", "--fp8-param-gather", "--fp8-recipe", "--fp8-amax-history-len", "--num-layers", "--hidden-size",
    "--num-attention-heads", "--ffn-hidden-size", "--num-query-groups", "--swiglu", "--squared-relu",
    "--untie-embeddings-and-output-weights", "--disable-bias-linear", "--add-qkv-bias", "--normalization",
    "--position-embedding-type", "--no-gradient-accumulation-fusion", "--cross-entropy-loss-fusion", "--tp-comm-overlap", "--use-megatron-fsdp",
    "--data-parallel-sharding-strategy", "--attention-dropout", "--hidden-dropout",
    "--moe-token-dispatcher-type", "--overlap-moe-expert-parallel-comm", "--kv-channels", "--optimizer",
    "--ddp-bucket-size", "--max-position-embeddings", "--num-layers-at-start-in-bf16", "--num-layers-at-end-in-bf16",
    "--first-last-layers-bf16", "--moe-layer-freq"};

// Whether `key` is one of a table's names (the flag and key tables below).
template <std::size_t N>
bool in_table(const char* const (&table)[N], const std::string& key) {
  for (const char* k : table)
    if (key == k) return true;
  return false;
}

bool is_read_flag(const std::string& f) { return in_table(kReadMegatronFlags, f); }

bool is_megatron_flag(const std::string& f) {
  const auto* b = std::begin(kMegatronFlags);
  const auto* e = std::end(kMegatronFlags);
  const auto* it = std::lower_bound(b, e, f, [](const char* a, const std::string& x) { return std::strcmp(a, x.c_str()) < 0; });
  return it != e && f == *it;
}

int edit_distance(const std::string& a, const std::string& b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = int(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diag = row[0];
    row[0] = int(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

// A flag Megatron-LM does not have that looks like one paraplan reads: a
// typo (edit distance 2, 3 for long flags) or a truncated or extended
// spelling. Returns the flag it most likely means, or "".
std::string looks_like_read_flag(const std::string& f) {
  if (f.size() > 80) return "";
  // Or any unknown flag naming parallelism, batch, recompute or precision.
  bool keyword = false;
  for (const char* w : {"parallel", "batch", "recompute", "checkpoint", "pipeline", "fp8", "bf16", "fp16", "precision",
                        "layers", "seq-len", "optimizer", "attention-backend", "grad-reduce", "overlap"})
    keyword = keyword || f.find(w) != std::string::npos;
  std::string best, nearest;
  int best_d = 1 << 30, nearest_d = 1 << 30;
  for (const char* k : kReadMegatronFlags) {
    const std::string ks = k;
    const int limit = ks.size() >= 20 ? 3 : 2;
    int d = edit_distance(f, ks);
    const bool prefix = (f.size() >= 8 && ks.rfind(f, 0) == 0) || f.rfind(ks + "-", 0) == 0 || f.rfind(ks + "s", 0) == 0;
    if (prefix) d = std::min(d, limit);
    if (d <= limit && d < best_d) best_d = d, best = ks;
    if (d < nearest_d) nearest_d = d, nearest = ks;
  }
  return !best.empty() ? best : keyword ? nearest : "";
}

// Megatron-LM flags that change memory or time in a way paraplan does not model: refused with the reason,
// unless given the value that changes nothing (ok: nullptr for a store_true flag, which only turns the thing
// on). NVIDIA/Megatron-LM@d98e8a64: the TransformerConfig / ModelParallelConfig / TrainingConfig fields behind
// the flags (megatron/core/transformer/transformer_config.py, megatron/training/config/*.py, turned into flags
// by ArgumentGroupFactory) and arguments.py's own (:2913-2918 optimizer, :3216 instances, :3660 hybrid, :3629
// and :3645 layer specs, :3667-3680 precision-aware optimizer). Issue 46: they were listed under -v as not
// changing memory or time.
struct MegatronRefused {
  const char* flag;
  const char* ok;  // the value that changes nothing; nullptr: a boolean flag, refused when given
  const char* why;
};
constexpr MegatronRefused kMegatronRefused[] = {
    {"--use-torch-fsdp2", nullptr, "Megatron on torch FSDP2 is not modelled under the megatron profile; use --framework fsdp (torchtitan's FSDP2) or --use-megatron-fsdp"},
    {"--optimizer-cpu-offload", nullptr, "optimizer CPU offload is not modelled"},
    {"--fine-grained-activation-offloading", nullptr, "activation offloading is not modelled"},
    {"--num-distributed-optimizer-instances", "1", "several distributed-optimizer instances (partial sharding) are not modelled"},
    {"--main-grads-dtype", "fp32", "16-bit main gradients (the precision-aware optimizer) are not modelled"},
    {"--main-params-dtype", "fp32", "16-bit main parameters (the precision-aware optimizer) are not modelled"},
    {"--exp-avg-dtype", "fp32", "a low-precision Adam first moment (the precision-aware optimizer) is not modelled"},
    {"--exp-avg-sq-dtype", "fp32", "a low-precision Adam second moment (the precision-aware optimizer) is not modelled"},
    {"--empty-unused-memory-level", "0", "emptying the caching allocator during the step changes reserved memory, which is not modelled"},
    {"--enable-cuda-graph", nullptr, "CUDA graphs (their static buffers and memory pool) are not modelled"},
    {"--external-cuda-graph", nullptr, "CUDA graphs (their static buffers and memory pool) are not modelled"},
    {"--cuda-graph-impl", "none", "CUDA graphs (their static buffers and memory pool) are not modelled"},
    {"--fp4", nullptr, "NVFP4 training is not modelled"},
    {"--fp4-param", nullptr, "NVFP4 training is not modelled"},
    {"--hybrid-override-pattern", nullptr, "Mamba hybrid layers are not modelled"},
    {"--is-hybrid-model", nullptr, "Mamba hybrid layers are not modelled"},
    {"--heterogeneous-layers-config-path", nullptr, "heterogeneous layers (a per-layer config) are not modelled"},
    {"--spec", nullptr, "a custom layer spec is not modelled"},
    {"--moe-shared-expert-overlap", nullptr, "the shared experts' overlap with the dispatch is not modelled"},
    {"--moe-enable-deepep", nullptr, "the DeepEP (flex) dispatcher is not modelled; expected --moe-token-dispatcher-type alltoall or allgather"},
    {"--delay-wgrad-compute", nullptr, "delayed weight-gradient computation is not modelled"},
    {"--qk-layernorm", nullptr, "is given but the model has no query/key norms (qk_norm: false)"},
    {"--multi-latent-attention", nullptr, "is given but the model has no multi-latent attention (q_lora_rank / kv_lora_rank)"},
};

// Megatron's --moe-layer-freq (arguments.py:327-345 moe_freq_type; gpt_layer_specs.py:647-656): an integer N
// (layer i is MoE when i % N == 0) or a Python list expression of 0s and 1s joined by + and repeated by *, e.g.
// "([0]*3+[1]*58)". Returns the per-layer pattern, or "" when the text is neither (the caller fails).
class FreqParser {
 public:
  explicit FreqParser(const std::string& s) : s_(s) {}
  bool parse(std::vector<int>* out) {
    if (!sum(out)) return false;
    skip();
    return i_ == s_.size();
  }

 private:
  void skip() {
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
  }
  bool number(long* n) {
    skip();
    const size_t b = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_])) && i_ - b < 7) ++i_;
    if (i_ == b) return false;
    *n = std::stol(s_.substr(b, i_ - b));
    return true;
  }
  bool atom(std::vector<int>* out) {
    skip();
    if (i_ < s_.size() && s_[i_] == '(') {
      ++i_;
      if (!sum(out)) return false;
      skip();
      return i_ < s_.size() && s_[i_++] == ')';
    }
    if (i_ >= s_.size() || s_[i_] != '[') return false;
    ++i_;
    for (;;) {
      long v = 0;
      if (!number(&v) || (v != 0 && v != 1)) return false;
      out->push_back(int(v));
      skip();
      if (i_ < s_.size() && s_[i_] == ',') { ++i_; continue; }
      return i_ < s_.size() && s_[i_++] == ']';
    }
  }
  bool term(std::vector<int>* out) {
    std::vector<int> a;
    if (!atom(&a)) return false;
    skip();
    while (i_ < s_.size() && s_[i_] == '*') {
      ++i_;
      long n = 0;
      if (!number(&n) || a.size() * size_t(n) > size_t(kMaxLayers)) return false;
      std::vector<int> r;
      for (long k = 0; k < n; ++k) r.insert(r.end(), a.begin(), a.end());
      a = std::move(r);
      skip();
    }
    out->insert(out->end(), a.begin(), a.end());
    return out->size() <= size_t(kMaxLayers);
  }
  bool sum(std::vector<int>* out) {
    if (!term(out)) return false;
    skip();
    while (i_ < s_.size() && s_[i_] == '+') {
      ++i_;
      if (!term(out)) return false;
      skip();
    }
    return true;
  }
  const std::string& s_;
  size_t i_ = 0;
};

const MegatronRefused* megatron_refused(const std::string& flag) {
  for (const MegatronRefused& r : kMegatronRefused)
    if (flag == r.flag) return &r;
  return nullptr;
}

// TransformerConfig fields that Megatron-LM's parser excludes, under "no CLI argument exists for these" and
// "deprecated and no CLI arg exists" (NVIDIA/Megatron-LM@d98e8a64 megatron/training/arguments.py:2307-2349,
// _add_network_size_args' exclude list; none has an add_argument of its own): such a "flag" fails at
// launch, so it is refused here (issue 46: --virtual-pipeline-model-parallel-size, --cpu-offloading were
// accepted). The generated kMegatronFlags lists every dataclass field, these included.
constexpr const char* kMegatronConfigOnly[] = {
    "--virtual-pipeline-model-parallel-size",
    "--params-dtype",
    "--enable-autocast",
    "--autocast-dtype",
    "--num-microbatches-with-partial-activation-checkpoints",
    "--tp-comm-overlap-disable-qkv",
    "--tp-comm-overlap-disable-fc1",
    "--pipeline-dtype",
    "--variable-seq-lengths",
    "--batch-p2p-comm",
    "--batch-p2p-sync",
    "--deallocate-pipeline-outputs",
    "--cpu-offloading",
    "--cpu-offloading-activations",
    "--cpu-offloading-weights",
    "--cpu-offloading-double-buffering",
    "--num-layers-in-first-pipeline-stage",
    "--num-layers-in-last-pipeline-stage",
    "--softmax-scale",
    "--gated-linear-unit",
    "--bias-activation-fusion",
    "--activation-func-fp8-input-store",
    "--test-mode",
    "--memory-efficient-layer-norm",
    "--fused-single-qkv-rope",
    "--fp8-dot-product-attention",
    "--fp8-multi-head-attention",
    "--tp-only-amax-red",
    "--use-kitchen",
    "--moe-token-dropping",
    "--cuda-graph-use-single-mempool",
    "--cuda-graph-retain-backward-graph",
    "--disable-parameter-transpose-cache",
    "--inference-sampling-seed",
    "--use-inference-optimized-layers",
    "--heterogeneous-block-specs",
    "--hetereogenous-dist-checkpoint",
    "--quant-recipe",
    "--tp-comm-atomic-ag",
    "--tp-comm-atomic-rs",
    "--moe-router-topk-limited-devices"};

bool is_config_only_field(const std::string& flag) {
  return std::find_if(std::begin(kMegatronConfigOnly), std::end(kMegatronConfigOnly),
                      [&](const char* f) { return flag == f; }) != std::end(kMegatronConfigOnly);
}

Draft from_megatron(const std::string& text, Spec* spec, std::vector<std::string>* ignored,
                    std::vector<std::string>* framework_defaults) {
  const std::string src = "--megatron-args";
  Draft d{Layout{}, {}, src};
  const auto args = split_args(text);
  int vpp_layers = 0;
  bool embedding_in_split = false, loss_in_split = false;
  bool full_granularity = false, method_given = false, num_layers_given = false, legacy_checkpoint = false,
       legacy_method = false;
  std::string method_flag = "--recompute-method", num_layers_flag = "--recompute-num-layers";
  bool grad_reduce_bf16 = false, overlap_grad_reduce = false, fp8_param_gather = false, tp_comm_overlap = false,
       overlap_param_gather = false;
  bool megatron_fsdp = false, local_impl = false, attention_given = false;
  bool attention_dropout_given = false, hidden_dropout_given = false;
  std::string fp8_bf16_layers_flag;  // --num-layers-at-start/end-in-bf16, --first-last-layers-bf16
  std::string moe_freq = "1";        // --moe-layer-freq; Megatron's default 1: every layer MoE (arguments.py:3520)
  // Megatron's default dispatcher at d98e8a64 is allgather (transformer_config.py:891).
  if (spec->model.is_moe()) spec->training.moe_dispatcher = Training::MoeDispatcher::kAllGather;
  int fsdp_zero = 3;  // --data-parallel-sharding-strategy's default optim_grads_params (arguments.py:3190)
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    if (flag.rfind("--", 0) != 0) continue;  // a value of a flag paraplan ignores
    const size_t eq = flag.find('=');
    bool inline_value = eq != std::string::npos;
    if (inline_value) value = flag.substr(eq + 1), flag = flag.substr(0, eq);
    if (is_config_only_field(flag))
      fail(src, flag,
           std::string("not a command-line flag of Megatron-LM@") + kMegatronCommit +
               ": a TransformerConfig field its parser excludes (arguments.py:2307-2349), so the launch would fail" +
               (flag == "--virtual-pipeline-model-parallel-size"
                    ? "; use --num-virtual-stages-per-pipeline-rank or --num-layers-per-virtual-pipeline-stage"
                    : ""));
    if (const MegatronRefused* r = megatron_refused(flag)) {
      // The model's own architecture flags are accepted where the model has the thing.
      const bool model_has = (flag == "--qk-layernorm" && spec->model.qk_norm) ||
                             (flag == "--multi-latent-attention" && spec->model.kv_lora_rank > 0);
      if (r->ok || model_has) {
        std::string v;
        if (inline_value) v = value;
        else if (r->ok && i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) v = args[++i];
        if (model_has || v == r->ok) {
          if (ignored) ignored->push_back(flag + (model_has ? " (the model's own)" : " " + v + " (the default)"));
          continue;
        }
        if (r->ok) fail(src, flag, std::string(r->why) + "; expected " + r->ok + ", got '" + v + "'");
      }
      fail(src, flag, r->why);
    }
    if (!is_read_flag(flag)) {
      // Megatron's argparse refuses a flag it does not know; paraplan refuses
      // one that looks like a layout, batch, recompute or precision flag, so
      // that a typo cannot silently give the default layout.
      if (!is_megatron_flag(flag)) {
        const std::string near = looks_like_read_flag(flag);
        if (!near.empty())
          fail(src, flag,
               "unknown flag (Megatron-LM@" + std::string(kMegatronCommit) + " has no such argument); did you mean " +
                   near + "?");
        if (ignored) ignored->push_back(flag + " (unknown to Megatron-LM@" + kMegatronCommit + ")");
      } else if (ignored) {
        ignored->push_back(flag);
      }
      continue;
    }
    if (!spec->model.is_moe() &&
        (flag == "--expert-tensor-parallel-size" || flag == "--moe-router-topk" || flag == "--moe-ffn-hidden-size" ||
         flag == "--moe-grouped-gemm" || flag == "--moe-router-force-load-balancing" ||
         flag == "--moe-expert-capacity-factor" || flag == "--moe-pad-expert-input-to-capacity" ||
         flag == "--moe-token-dispatcher-type" || flag == "--overlap-moe-expert-parallel-comm" ||
         flag == "--moe-layer-freq")) {
      // Megatron reads these only for a mixture of experts (arguments.py:587-588, 1650-1652).
      if (ignored) ignored->push_back(flag + " (the model has no experts)");
      continue;
    }
    auto val = [&]() -> const std::string& {
      if (!inline_value) {
        if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)
          fail(src, flag, "expected a value after " + flag);
        value = args[++i];
        inline_value = true;
      }
      return value;
    };
    auto model_must_match = [&](int model_value, const char* key) {
      const int v = to_pos_int(src, flag, val(), 1);
      if (v != model_value)
        fail(src, flag, "is " + std::to_string(v) + " but the model's " + key + " is " +
                            std::to_string(model_value));
    };
    if (flag == "--tensor-model-parallel-size") d.l.tp = capped_int(src, flag, val(), kMaxGpus), d.set.tp = true;
    else if (flag == "--pipeline-model-parallel-size") d.l.pp = capped_int(src, flag, val(), kMaxGpus), d.set.pp = true;
    else if (flag == "--num-layers-per-virtual-pipeline-stage") vpp_layers = to_pos_int(src, flag, val(), 1);
    else if (flag == "--num-virtual-stages-per-pipeline-rank")
      d.l.vpp = capped_int(src, flag, val(), kMaxLayers), d.set.vpp = true;
    else if (flag == "--decoder-first-pipeline-num-layers")
      d.l.first_stage_layers = capped_int(src, flag, val(), kMaxLayers), d.set.first_stage_layers = true;
    else if (flag == "--decoder-last-pipeline-num-layers")
      d.l.last_stage_layers = capped_int(src, flag, val(), kMaxLayers), d.set.last_stage_layers = true;
    else if (flag == "--account-for-embedding-in-pipeline-split") embedding_in_split = true;
    else if (flag == "--account-for-loss-in-pipeline-split") loss_in_split = true;
    else if (flag == "--sequence-parallel") d.l.sp = true, d.set.sp = true;
    else if (flag == "--micro-batch-size") d.l.mbs = capped_int(src, flag, val(), kMaxBatch), d.set.mbs = true;
    else if (flag == "--use-distributed-optimizer") d.l.zero = 1, d.set.zero = true;
    else if (flag == "--recompute-activations") d.l.recompute = Recompute::kSelective, d.set.recompute = true;
    else if (flag == "--recompute-method" || flag == "--activations-checkpoint-method") {
      const std::string& v = val();
      if (v == "uniform") d.l.recompute_method = RecomputeMethod::kUniform;
      else if (v == "block") d.l.recompute_method = RecomputeMethod::kBlock;
      else fail(src, flag, "expected uniform or block, got '" + v + "'");
      d.set.recompute_method = method_given = true;
      legacy_method |= flag == "--activations-checkpoint-method";
      method_flag = flag;
    } else if (flag == "--recompute-num-layers" || flag == "--activations-checkpoint-num-layers" ||
               flag == "--checkpoint-num-layers") {
      d.l.recompute_layers = capped_int(src, flag, val(), kMaxLayers);
      d.set.recompute_layers = num_layers_given = true;
      num_layers_flag = flag;
    } else if (flag == "--recompute-modules") {
      // nargs='+': every following token that is not a flag. Selective
      // recompute as modelled re-runs the attention core ("core_attn", the
      // default); the other modules would drop more tensors.
      std::vector<std::string> mods;
      if (inline_value) mods.push_back(value);
      while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) mods.push_back(args[++i]);
      if (mods.empty()) fail(src, flag, "expected one or more modules");
      for (const std::string& mname : mods)
        if (mname != "core_attn")
          fail(src, flag, "only core_attn (the default) is modelled, got '" + mname + "'");
    } else if (flag == "--checkpoint-activations") {
      // Megatron-LM v2.x: full recomputation of every layer, uniform groups of
      // --checkpoint-num-layers (default 1) (NVIDIA/Megatron-LM@v2.6
      // megatron/arguments.py:94-100, 410-430; v2.5 :393-402). Today's
      // Megatron exits on it (arguments.py:601-605): read as v2 did.
      d.l.recompute = Recompute::kFull, d.set.recompute = true, legacy_checkpoint = true;
    } else if (flag == "--recompute-granularity") {
      const std::string& v = val();
      if (v == "full") d.l.recompute = Recompute::kFull, full_granularity = true;
      else if (v == "selective") d.l.recompute = Recompute::kSelective;
      else fail(src, flag, "expected full or selective, got '" + v + "'");
      d.set.recompute = true;
    } else if (flag == "--global-batch-size") {
      spec->training.global_batch_size = capped_int(src, flag, val(), kMaxBatch);
      spec->training.global_batch_size_given = true;  // not a default any more (the report's header)
    } else if (flag == "--seq-length") {
      spec->training.seq_length = capped_int(src, flag, val(), kMaxSeq);
      spec->training.seq_length_given = true;
    }
    else if (flag == "--grad-reduce-in-bf16") grad_reduce_bf16 = true;
    else if (flag == "--overlap-grad-reduce") overlap_grad_reduce = true;
    else if (flag == "--overlap-param-gather") overlap_param_gather = true;  // needs --overlap-grad-reduce in Megatron
    else if (flag == "--attention-backend") {
      // NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/enums.py:51-58:
      // flash and fused (cuDNN) keep no s x s scores; auto picks one of them
      // on Hopper/Ampere; unfused and local materialise the scores.
      const std::string& v = val();
      attention_given = true;
      if (v == "flash" || v == "fused" || v == "auto") spec->training.flash_attention = true;
      else if (v == "unfused" || v == "local") spec->training.flash_attention = false;
      else fail(src, flag, "expected flash, fused, unfused, local or auto, got '" + v + "'");
    } else if (flag == "--use-flash-attn") spec->training.flash_attention = true, attention_given = true;
    else if (flag == "--transformer-impl") {
      // local: Megatron-core's own modules, attention unfused (megatron/core/models/backends.py:129-131)
      // unless --attention-backend says otherwise; no Transformer Engine workspaces.
      const std::string& v = val();
      if (v == "transformer_engine") spec->training.transformer_engine = true;
      else if (v == "local") spec->training.transformer_engine = false, local_impl = true;
      else fail(src, flag, "expected transformer_engine or local, got '" + v + "'");
    }
    else if (flag == "--no-gradient-accumulation-fusion") spec->training.gradient_accumulation_fusion = false;
    else if (flag == "--cross-entropy-loss-fusion") spec->training.cross_entropy_fusion = true;
    else if (flag == "--tp-comm-overlap") tp_comm_overlap = true;
    else if (flag == "--no-async-tensor-model-parallel-allreduce") spec->training.tp_async_allreduce = false;
    else if (flag == "--no-overlap-p2p-communication") spec->training.overlap_p2p_comm = false;
    else if (flag == "--overlap-p2p-communication-warmup-flush") spec->training.overlap_p2p_comm_warmup_flush = true;
    else if (flag == "--deterministic-mode") spec->training.deterministic = true;
    else if (flag == "--use-megatron-fsdp") megatron_fsdp = true;
    else if (flag == "--data-parallel-sharding-strategy") {
      // NVIDIA/Megatron-LM@d98e8a64 arguments.py:3190-3192: what Megatron-FSDP shards.
      const std::string& v = val();
      if (v == "no_shard") fsdp_zero = 0;
      else if (v == "optim") fsdp_zero = 1;
      else if (v == "optim_grads") fsdp_zero = 2;
      else if (v == "optim_grads_params") fsdp_zero = 3;
      else fail(src, flag, "expected no_shard, optim, optim_grads or optim_grads_params, got '" + v + "'");
    }
    else if (flag == "--fp8-format") {
      // e4m3 or hybrid (e4m3 forward, e5m2 gradients): both 1-byte GEMMs.
      const std::string& v = val();
      if (v != "e4m3" && v != "hybrid") fail(src, flag, "expected e4m3 or hybrid, got '" + v + "'");
      if (spec->cluster.gpu.peak_tflops_fp8 <= 0)
        fail(src, flag, "GPU " + spec->cluster.gpu.name + " has no FP8 peak (cluster gpu.peak_tflops_fp8)");
      if (spec->model.is_moe()) fail(src, flag, "FP8 training of a mixture of experts is not modelled");
      spec->training.fp8 = true;
    } else if (flag == "--fp8-param-gather") fp8_param_gather = true;
    else if (flag == "--fp8-recipe") {
      const std::string& v = val();
      if (v != "delayed" && v != "tensorwise" && v != "blockwise" && v != "mxfp8")
        fail(src, flag, "expected delayed, tensorwise, blockwise or mxfp8, got '" + v + "'");
    } else if (flag == "--fp8-amax-history-len")
      spec->training.fp8_amax_history_len = capped_int(src, flag, val(), 1 << 20);
    else if (flag == "--bf16") {
      if (!spec->cluster.gpu.bf16)
        fail(src, flag, no_bf16_reason(spec->cluster.gpu) + "; use --fp16");
      set_precision(&spec->training, DType::kBf16);
      spec->training.precision_given = true;
    }
    else if (flag == "--fp16") set_precision(&spec->training, DType::kFp16), spec->training.precision_given = true;
    else if (flag == "--num-layers") model_must_match(spec->model.num_layers, "num_layers");
    else if (flag == "--hidden-size") model_must_match(spec->model.hidden_size, "hidden_size");
    else if (flag == "--num-attention-heads") model_must_match(spec->model.num_attention_heads, "num_attention_heads");
    else if (flag == "--ffn-hidden-size") model_must_match(spec->model.ffn_hidden_size, "ffn_hidden_size");
    else if (flag == "--num-query-groups") model_must_match(spec->model.num_kv_heads, "num_kv_heads");
    // Architecture flags, where given, must describe the spec's model.
    else if (flag == "--swiglu") {
      if (spec->model.activation != Activation::kSwiglu)
        fail(src, flag, "is given but the model's activation is not swiglu");
    } else if (flag == "--squared-relu") {
      if (spec->model.activation != Activation::kRelu2)
        fail(src, flag, "is given but the model's activation is not relu2");
    } else if (flag == "--untie-embeddings-and-output-weights") {
      if (spec->model.tie_embeddings) fail(src, flag, "is given but the model ties its embeddings (tie_embeddings: true)");
    } else if (flag == "--disable-bias-linear") {
      if (spec->model.bias) fail(src, flag, "is given but the model has biases (bias: true)");
    } else if (flag == "--add-qkv-bias") {
      if (!spec->model.has_qkv_bias()) fail(src, flag, "is given but the model has no QKV bias (qkv_bias: false)");
    } else if (flag == "--normalization") {
      const std::string& v = val();
      const bool rms = spec->model.normalization == Normalization::kRmsNorm;
      if (v != "LayerNorm" && v != "RMSNorm") fail(src, flag, "expected LayerNorm or RMSNorm, got '" + v + "'");
      if ((v == "RMSNorm") != rms)
        fail(src, flag, "is " + v + " but the model's normalization is " + (rms ? "rmsnorm" : "layernorm"));
    } else if (flag == "--position-embedding-type") {
      const std::string& v = val();
      const bool rope = spec->model.position_embedding == PositionEmbedding::kRope;
      if ((v == "rope" && !rope) || (v == "learned_absolute" && rope))
        fail(src, flag, "is " + v + " but the model's position_embedding is " + (rope ? "rope" : "learned"));
    }
    else if (flag == "--context-parallel-size") d.l.cp = capped_int(src, flag, val(), kMaxGpus), d.set.cp = true;
    else if (flag == "--microbatch-group-size-per-virtual-pipeline-stage")
      d.l.microbatch_group = capped_int(src, flag, val(), kMaxBatch), d.set.microbatch_group = true;
    else if (flag == "--cp-comm-type") {
      // Only the p2p ring (Megatron's default, arguments.py:3221) is modelled.
      if (val() != "p2p") fail(src, flag, "only p2p (ring attention, the default) is modelled, got '" + value + "'");
    } else if (flag == "--expert-model-parallel-size") d.l.ep = capped_int(src, flag, val(), kMaxGpus), d.set.ep = true;
    else if (flag == "--expert-tensor-parallel-size") d.l.etp = capped_int(src, flag, val(), kMaxGpus), d.set.etp = true;
    else if (flag == "--num-experts") model_must_match(spec->model.num_experts, "num_experts");
    else if (flag == "--moe-router-topk") model_must_match(spec->model.experts_per_token, "experts_per_token");
    else if (flag == "--moe-ffn-hidden-size") model_must_match(spec->model.moe_ffn_hidden_size, "moe_ffn_hidden_size");
    else if (flag == "--mtp-num-layers") {
      // Megatron builds the MTP modules only when this is given (megatron/training/models/gpt.py:414).
      model_must_match(spec->model.mtp_layers, "mtp_layers");
      spec->training.mtp = true;
    }
    else if (flag == "--moe-expert-capacity-factor") {
      // A negative factor means dropless (transformer_config.py:1836-1838).
      const std::string& v = val();
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end) fail(src, flag, "expected a number, got '" + v + "'");
      if (!(x <= 64)) fail(src, flag, "expected at most 64, got " + v);
      spec->training.moe_capacity_factor = x > 0 ? x : 0;
    } else if (flag == "--moe-pad-expert-input-to-capacity") spec->training.moe_pad_to_capacity = true;
    else if (flag == "--moe-grouped-gemm") spec->training.moe_grouped_gemm = true;
    else if (flag == "--kv-channels") model_must_match(spec->model.head_dim, "head_dim");
    else if (flag == "--moe-layer-freq") moe_freq = val();
    else if (flag == "--max-position-embeddings") {
      // The learned position table's rows (language_model_embedding.py); with rope it only bounds the sequence.
      const int v = to_pos_int(src, flag, val(), 1);
      if (spec->model.position_embedding == PositionEmbedding::kLearned && v != spec->model.max_position_embeddings)
        fail(src, flag, "is " + std::to_string(v) + " but the model's max_position_embeddings is " +
                            std::to_string(spec->model.max_position_embeddings) + " (its learned position table)");
    } else if (flag == "--optimizer") {
      // arguments.py:2913-2916: adam (default), sgd, muon, dist_muon, lion, soap, adaptive_muon.
      const std::string& v = val();
      if (v == "adam") spec->training.optimizer = OptimizerKind::kAdam;
      else if (v == "sgd") spec->training.optimizer = OptimizerKind::kSgd;
      else fail(src, flag, "'" + v + "' is not modelled; expected adam or sgd");
      spec->training.optimizer_given = true;
      if (!spec->training.optimizer_state_bytes_given)
        spec->training.optimizer_state_bytes = default_optimizer_state_bytes(spec->training.optimizer, spec->training.precision);
    } else if (flag == "--ddp-bucket-size") {
      // arguments.py:3125: the DDP bucket in parameters (the buckets are views of the gradient buffer).
      spec->training.grad_bucket_params = to_pos_int(src, flag, val(), 1);
      spec->training.grad_bucket_params_given = true;
    } else if (flag == "--num-layers-at-start-in-bf16" || flag == "--num-layers-at-end-in-bf16" ||
               flag == "--first-last-layers-bf16") {
      // FP8 only (transformer_config.py first_last_layers_bf16): without --fp8-format nothing changes.
      if (flag != "--first-last-layers-bf16") to_pos_int(src, flag, val(), 0);
      fp8_bf16_layers_flag = flag;
    }
    else if (flag == "--moe-token-dispatcher-type") {
      const std::string& v = val();
      if (v == "alltoall") spec->training.moe_dispatcher = Training::MoeDispatcher::kAllToAll;
      else if (v == "allgather") spec->training.moe_dispatcher = Training::MoeDispatcher::kAllGather;
      else if (v == "flex")
        fail(src, flag, "flex (DeepEP, HybridEP or NCCL-EP, token_dispatcher.py:963-1809) is not modelled; expected alltoall or allgather");
      else fail(src, flag, "expected allgather, alltoall or flex, got '" + v + "'");
    } else if (flag == "--overlap-moe-expert-parallel-comm") spec->training.moe_ep_overlap = true;
    else if (flag == "--attention-dropout" || flag == "--hidden-dropout") {
      // A probability (argparse type=float); Megatron asserts nothing, torch's dropout refuses p outside [0, 1].
      const std::string& v = val();
      char* end = nullptr;
      const double p = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(p >= 0 && p < 1)) fail(src, flag, "expected a probability in [0, 1), got '" + v + "'");
      if (flag == "--attention-dropout") spec->model.attention_dropout = p, attention_dropout_given = true;
      else spec->model.hidden_dropout = p, hidden_dropout_given = true;
    }
    // Random router logits for benchmarks (moe/router.py:861-863): every expert rank gets the mean share.
    else if (flag == "--moe-router-force-load-balancing") spec->training.moe_load_imbalance = 1.0;
    // Every other Megatron flag does not change the memory layout: ignored.
  }
  if (local_impl && !attention_given) spec->training.flash_attention = false;
  if (spec->model.is_moe()) {
    // The MoE layers Megatron builds must be the model's (gpt_layer_specs.py:647-656).
    std::vector<int> pattern;
    const Model& m = spec->model;
    if (!moe_freq.empty() && std::all_of(moe_freq.begin(), moe_freq.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
      const int n = capped_int(src, "--moe-layer-freq", moe_freq, kMaxLayers);
      for (int i = 0; i < m.num_layers; ++i) pattern.push_back(i % n == 0);
    } else if (!FreqParser(moe_freq).parse(&pattern)) {
      fail(src, "--moe-layer-freq", "expected an integer or a list expression of 0s and 1s such as ([0]*3+[1]*58), got '" +
                                        SpecError::printable(moe_freq, 80) + "'");
    }
    if (int(pattern.size()) != m.num_layers)
      fail(src, "--moe-layer-freq", "gives " + std::to_string(pattern.size()) + " layers but the model has " +
                                        std::to_string(m.num_layers) + " (gpt_layer_specs.py:651-655 asserts the length)");
    for (int i = 0; i < m.num_layers; ++i)
      if (bool(pattern[i]) != m.is_moe_layer(i))
        fail(src, "--moe-layer-freq",
             std::string(moe_freq == "1" ? "absent, so Megatron makes every layer MoE (default 1, arguments.py:3520), "
                                         : "'" + SpecError::printable(moe_freq, 60) + "' ") +
                 "but the model's layer " + std::to_string(i) + " is " + (m.is_moe_layer(i) ? "MoE" : "dense") +
                 "; expected --moe-layer-freq " + megatron_moe_layer_freq(m));
  }
  if (!fp8_bf16_layers_flag.empty()) {
    if (spec->training.fp8)
      fail(src, fp8_bf16_layers_flag, "layers kept in bf16 under FP8 are not modelled (every layer's GEMMs are priced in FP8)");
    if (ignored) ignored->push_back(fp8_bf16_layers_flag + " (FP8 only; no --fp8-format)");
  }
  // Megatron trains with dropout unless told otherwise: hidden_dropout = attention_dropout = 0.1
  // (NVIDIA/Megatron-LM@d98e8a64 megatron/core/transformer/transformer_config.py:188, 191; the flags'
  // defaults come from the dataclass, arguments.py _add_network_size_args). A Megatron command line without
  // them launches that run, whatever the model's own config says (issue 46), and the report says so.
  for (auto [given, p, name] : {std::tuple{attention_dropout_given, &spec->model.attention_dropout, "attention_dropout"},
                                std::tuple{hidden_dropout_given, &spec->model.hidden_dropout, "hidden_dropout"}}) {
    if (given) continue;
    if (framework_defaults && *p != 0.1)
      framework_defaults->push_back(fmt::format("{} 0.1 (Megatron-LM's default without --{}, transformer_config.py:{})",
                                                name, name == std::string("attention_dropout") ? "attention-dropout" : "hidden-dropout",
                                                name == std::string("attention_dropout") ? 191 : 188));
    *p = 0.1;
  }
  // Megatron accumulates and reduces gradients in fp32 unless
  // --grad-reduce-in-bf16 (arguments.py:1213-1217), and overlaps the DP
  // reduction only with --overlap-grad-reduce (default off).
  if (grad_reduce_bf16 && spec->training.precision == DType::kBf16) spec->training.grad_dtype = DType::kBf16;
  else spec->training.grad_dtype = DType::kFp32;
  spec->training.grad_dtype_given = true;
  spec->training.overlap_dp_comm = overlap_grad_reduce;
  // Without --overlap-param-gather the distributed optimizer gathers the
  // updated parameters synchronously after the step (distrib_optimizer.py:3175-3177).
  spec->training.overlap_param_gather = overlap_param_gather;
  // Megatron-FSDP (v1 also turns on the distributed optimizer, arguments.py:1118-1135): the sharding strategy
  // decides the ZeRO stage; the strategy flag alone does nothing.
  if (megatron_fsdp) d.l.zero = fsdp_zero, d.set.zero = true;
  if (tp_comm_overlap) {
    // NVIDIA/Megatron-LM@d98e8a64 megatron/training/arguments.py:1441-1442 (asserted).
    if (!d.l.sp) fail(src, "--tp-comm-overlap", "needs --sequence-parallel (Megatron asserts it)");
    spec->training.tp_comm_overlap = true;
  }
  if (spec->training.overlap_p2p_comm_warmup_flush && !spec->training.overlap_p2p_comm)
    // NVIDIA/Megatron-LM@d98e8a64 megatron/core/model_parallel_config.py:570-574 (raises).
    fail(src, "--overlap-p2p-communication-warmup-flush",
         "needs the pipeline-send overlap that --no-overlap-p2p-communication turns off (Megatron refuses the pair)");
  if (fp8_param_gather) {
    if (!spec->training.fp8) fail(src, "--fp8-param-gather", "needs --fp8-format (FP8 training)");
    spec->training.fp8_param_gather = true;
  }
  if (legacy_method && !d.set.recompute) {
    // Megatron-LM from c1e0689d (2021-08-10) to the recompute-* renaming (cfd2e216, 2022-04-28): the method alone
    // turns on full recomputation, --activations-checkpoint-num-layers (default 1) layers a chunk
    // (NVIDIA/Megatron-LM@c1e0689d megatron/arguments.py:411-423, model/transformer.py:678); the SC21
    // scripts (examples/sc21/run_table_1.sh) give it so.
    d.l.recompute = Recompute::kFull, d.set.recompute = true, legacy_checkpoint = true;
  }
  if (full_granularity && !legacy_checkpoint && (!method_given || !num_layers_given))
    fail(src, method_given ? "--recompute-num-layers" : "--recompute-method",
         "--recompute-granularity full needs --recompute-method uniform|block and --recompute-num-layers N "
         "(Megatron-LM transformer_config.py:1908-1925 refuses it without them)");
  if ((method_given || num_layers_given) && d.l.recompute != Recompute::kFull)
    fail(src, method_given ? method_flag : num_layers_flag,
         "applies to --recompute-granularity full only (Megatron-LM transformer_config.py:1926-1929, arguments.py:1425-1428)");
  // Layers the split counts: the embedding and/or the loss count as one layer
  // each with --account-for-embedding/loss-in-pipeline-split
  // (NVIDIA/Megatron-LM@d98e8a64 transformer_block.py:144-155, arguments.py:958-967).
  const int counted = spec->model.num_layers + int(embedding_in_split) + int(loss_in_split);
  const char* account_flag = embedding_in_split ? "--account-for-embedding-in-pipeline-split"
                                                : "--account-for-loss-in-pipeline-split";
  if ((embedding_in_split || loss_in_split) && d.l.uneven())
    fail(src, account_flag,
         "cannot be combined with --decoder-first/last-pipeline-num-layers (transformer_block.py:108-112 asserts the same)");
  if (vpp_layers) {
    if (d.l.uneven())
      fail(src, "--num-layers-per-virtual-pipeline-stage",
           "with uneven pipeline stages give --num-virtual-stages-per-pipeline-rank instead (Megatron-LM "
           "arguments.py:955 asserts the same)");
    const int per_stage = counted / std::max(d.l.pp, 1);
    if (per_stage == 0)
      fail(src, "--pipeline-model-parallel-size",
           "expected at most the model's " + std::to_string(spec->model.num_layers) + " layers, got " +
               std::to_string(d.l.pp));
    if (per_stage % vpp_layers)
      fail(src, "--num-layers-per-virtual-pipeline-stage",
           "expected a divisor of the " + std::to_string(per_stage) + " layers per pipeline stage");
    d.l.vpp = per_stage / vpp_layers;
    d.set.vpp = true;
  }
  if (embedding_in_split || loss_in_split) {
    // The first / last rank builds one layer fewer, in its first / last model
    // chunk (transformer_block.py:186-200): uneven stages whose short chunk
    // is the first (last), as Layout::first/last_stage_layers mean it.
    const int pp = std::max(d.l.pp, 1);
    if (pp < 2 || counted % pp)
      fail(src, account_flag,
           "num_layers " + std::to_string(spec->model.num_layers) + " + " +
               std::to_string(int(embedding_in_split) + int(loss_in_split)) + " = " + std::to_string(counted) +
               " must be divisible by --pipeline-model-parallel-size " + std::to_string(pp) + " (>= 2)");
    const int per = counted / pp;
    if (per % d.l.vpp)
      fail(src, account_flag,
           std::to_string(per) + " layers per pipeline stage must be divisible by the virtual pipeline size " +
               std::to_string(d.l.vpp) + " (transformer_block.py:176-180)");
    if (embedding_in_split) d.l.first_stage_layers = per - 1, d.set.first_stage_layers = true;
    if (loss_in_split) d.l.last_stage_layers = per - 1, d.set.last_stage_layers = true;
  } else if (d.l.vpp > 1) {
    // Megatron asserts each uneven rank's layers divide into its chunks.
    for (auto [n, flag] : {std::pair{d.l.first_stage_layers, "--decoder-first-pipeline-num-layers"},
                           std::pair{d.l.last_stage_layers, "--decoder-last-pipeline-num-layers"}})
      if (n > 0 && n % d.l.vpp)
        fail(src, flag,
             std::to_string(n) + " layers must be divisible by the virtual pipeline size " + std::to_string(d.l.vpp) +
                 " (transformer_block.py:176-180)");
  }
  return d;
}

// Every key of a DeepSpeed config paraplan does not read, and why it does not change memory or time as
// modelled (-v lists them), or refuses unless it has the value that changes nothing. deepspeedai/DeepSpeed@edaa7221:
// the top level as DeepSpeedConfig._initialize_params reads it (deepspeed/runtime/config.py:690-860; an unknown
// top-level key is ignored there too), zero_optimization as DeepSpeedZeroConfig declares it
// (deepspeed/runtime/zero/config.py:95-376; extra="forbid", runtime/config_utils.py:110, so an unknown key is
// refused, as DeepSpeed refuses it). tests/data/deepspeed-edaa7221-keys.txt lists both, and a test walks it.
struct DsIgnored {
  const char* key;
  const char* why;
};
constexpr DsIgnored kDsIgnoredTop[] = {
    {"steps_per_print", "logging"}, {"wall_clock_breakdown", "timing logs"}, {"memory_breakdown", "logging"},
    {"dump_state", "logging"}, {"log_level", "logging"}, {"timers", "timing logs"}, {"tensorboard", "monitoring"},
    {"wandb", "monitoring"}, {"csv_monitor", "monitoring"}, {"comet", "monitoring"}, {"comms_logger", "logging"},
    {"flops_profiler", "a profiler run once"}, {"autotuning", "the autotuner's own runs"}, {"scheduler", "the learning rate"},
    {"gradient_clipping", "the clip: one norm over the gradients, a fused pass the optimizer term does not separate"},
    {"zero_allow_untested_optimizer", "a permission"}, {"zero_force_ds_cpu_optimizer", "applies with offload (refused)"},
    {"checkpoint", "checkpoint I/O"}, {"nebula", "checkpoint I/O"}, {"aio", "NVMe offload I/O (offload refused)"},
    {"dataloader_drop_last", "data loading"}, {"graph_harvesting", "CUDA graphs of the optimizer on non-CUDA accelerators"},
    {"gradient_predivide_factor", "a scale of the same reduction"}, {"prescale_gradients", "a scale of the same reduction"},
    {"gradient_allreduce_op", "the reduction's op, not its size"}, {"seq_parallel_communication_data_type", "Ulysses (cp refused)"},
    {"use_data_before_expert_parallel_", "the rank order of the expert groups"},
    {"expert_data_parallel", "the expert groups' topology"}, {"managed_gradient_accumulation", "where accumulation is counted"},
};
constexpr DsIgnored kDsIgnoredZero[] = {
    {"load_from_fp32_weights", "checkpoint loading"}, {"elastic_checkpoint", "checkpoint format"},
    {"gather_16bit_weights_on_model_save", "checkpoint saving"}, {"stage3_gather_16bit_weights_on_model_save", "checkpoint saving"},
    {"stage3_gather_fp16_weights_on_model_save", "checkpoint saving"}, {"ignore_unused_parameters", "a check"},
    {"round_robin_gradients", "the order gradients are copied in with offload"}, {"pipeline_loading_checkpoint", "checkpoint loading"},
    {"override_module_apply", "module.apply under ZeRO-3 init"}, {"log_trace_cache_warnings", "logging"},
    {"enable_sanity_checks", "checks"}, {"save_muon_momentum_buffer_in_memory", "Muon only"},
    {"leaf_module", "which modules fetch as one (the gather term takes the largest module)"},
    {"use_multi_rank_bucket_allreduce", "the non-ZeRO all-reduce's bucketing, the same bytes"},
    {"sub_group_size", "groups the fp32 optimizer step; on the GPU every group is resident (zero/stage3.py)"},
    {"model_persistence_threshold", "caps the persisted parameters (stage3_param_persistence_threshold)"},
    {"stage3_model_persistence_threshold", "caps the persisted parameters (stage3_param_persistence_threshold)"},
    {"cpu_offload_use_pin_memory", "applies with offload (refused)"}, {"legacy_stage1", "deprecated"},
    {"zeropp_loco_param", "applies with zero_quantized_gradients (refused)"},
    {"mics_hierarchical_params_gather", "applies with mics_shard_size (refused)"},
    {"allgather_sequential", "the all-gathers' launch order"}, {"stage3_allgather_sequential", "the all-gathers' launch order"},
};
// zero_optimization keys that change what is modelled unless they hold this value (DeepSpeedZeroConfig's default).
struct DsDefaultOnly {
  const char* key;
  const char* value;  // the JSON value that changes nothing
  const char* why;
};
constexpr DsDefaultOnly kDsDefaultOnlyZero[] = {
    {"contiguous_gradients", "true", "false keeps the gradients outside the contiguous IPG buffer (stage_1_and_2.py), not modelled"},
    {"reduce_scatter", "true", "false reduces gradients by all-reduce, not modelled"},
    {"allgather_partitions", "true", "false gathers the partitions by broadcasts, not modelled"},
    {"cpu_offload", "false", "CPU offload is not modelled"}, {"cpu_offload_param", "false", "CPU offload is not modelled"},
    {"zero_hpz_partition_size", "1", "ZeRO++ hierarchical partitioning (a secondary weight copy per node) is not modelled"},
    {"zero_quantized_weights", "false", "ZeRO++ quantized weight gathers are not modelled"},
    {"zero_quantized_nontrainable_weights", "false", "ZeRO++ quantized weights are not modelled"},
    {"zero_quantized_gradients", "false", "ZeRO++ quantized gradient reduction is not modelled"},
    {"mics_shard_size", "-1", "MiCS sharding is not modelled"},
    {"memory_efficient_linear", "true", "false saves the linears' inputs differently under ZeRO-3, not modelled"},
    {"use_all_reduce_for_fetch_params", "false", "fetching ZeRO-3 parameters by all-reduce is not modelled"},
    {"stage3_use_all_reduce_for_fetch_params", "false", "fetching ZeRO-3 parameters by all-reduce is not modelled"},
    {"zenflow", "null", "ZenFlow's offloaded optimizer is not modelled"},
    {"module_granularity_threshold", "0", "fetching small modules as one is not modelled"},
    {"stage3_module_granularity_threshold", "0", "fetching small modules as one is not modelled"},
};
// Top-level sections that change the run when enabled: refused unless "enabled" is false (or absent).
constexpr DsDefaultOnly kDsDisabledOnlyTop[] = {
    {"amp", "", "NVIDIA Apex AMP is not modelled; use bf16 or fp16"},
    {"torch_autocast", "", "torch.autocast with fp32 weights is not modelled; use bf16 or fp16"},
    {"sparse_attention", "", "block-sparse attention is not modelled"},
    {"compression_training", "", "compression training is not modelled"},
    {"curriculum_learning", "", "curriculum learning (shorter sequences early) is not modelled"},
    {"data_efficiency", "", "data efficiency (random-LTD, curriculum) is not modelled"},
    {"progressive_layer_drop", "", "progressive layer drop is not modelled"},
    {"eigenvalue", "", "the eigenvalue computation adds backward passes, not modelled"},
    {"elasticity", "", "elastic batch sizes are not modelled"},
    {"hybrid_engine", "", "the RLHF hybrid engine is not modelled"},
    {"compile", "", "DeepCompile is not modelled"},
};

const DsIgnored* ds_ignored(const DsIgnored* b, const DsIgnored* e, const std::string& k) {
  for (; b != e; ++b)
    if (k == b->key) return b;
  return nullptr;
}

// What the walk does with one key of zero_optimization that from_deepspeed does not read: listed, refused
// unless it holds its default, or refused as unknown (DeepSpeed's extra="forbid").
void walk_ds_zero_key(const std::string& path, const std::string& k, const json& v, std::vector<std::string>* ignored) {
  const std::string field = "zero_optimization." + k;
  if (const DsIgnored* i = ds_ignored(std::begin(kDsIgnoredZero), std::end(kDsIgnoredZero), k)) {
    if (ignored) ignored->push_back(field + " (" + i->why + ")");
    return;
  }
  for (const DsDefaultOnly& d : kDsDefaultOnlyZero)
    if (k == d.key) {
      if (v.is_null() || v == json::parse(d.value)) {
        if (ignored) ignored->push_back(field + " (its default, " + std::string(d.value) + ")");
        return;
      }
      fail(path, field, std::string(d.why) + "; expected " + d.value);
    }
  fail(path, field,
       std::string("unknown key (DeepSpeed@edaa7221's DeepSpeedZeroConfig has no such field and refuses it: "
                   "runtime/zero/config.py, extra=\"forbid\")"));
}

// The same for a top-level key.
void walk_ds_top_key(const std::string& path, const std::string& k, const json& v, std::vector<std::string>* ignored) {
  if (const DsIgnored* i = ds_ignored(std::begin(kDsIgnoredTop), std::end(kDsIgnoredTop), k)) {
    if (ignored) ignored->push_back(k + " (" + i->why + ")");
    return;
  }
  for (const DsDefaultOnly& d : kDsDisabledOnlyTop)
    if (k == d.key) {
      // compression_training and sparse_attention have no "enabled": any setting turns them on.
      const bool whole = k == "compression_training" || k == "sparse_attention";
      const bool on = k == "compile" ? v.is_object() && v.value("deepcompile", false)
                      : whole        ? !(v.is_null() || (v.is_object() && v.empty()))
                                     : v.is_object() && v.contains("enabled") && v["enabled"] != false;
      if (!on) {
        if (ignored) ignored->push_back(k + " (not enabled)");
        return;
      }
      fail(path, k + (k == "compile" ? ".deepcompile" : whole ? "" : ".enabled"),
           std::string(d.why) + (whole ? "; expected it left out" : "; expected false"));
    }
  if (ignored) ignored->push_back(k + " (unknown to DeepSpeed@edaa7221, which ignores it too)");
}

Draft from_deepspeed(const std::string& path, Spec* spec, std::vector<std::string>* ignored) {
  const std::string text = read_text_file(path, "--deepspeed-config");
  const json j = parse_json_input(text, path, "--deepspeed-config");
  if (!j.is_object()) fail(path, "--deepspeed-config", "expected a JSON object (DeepSpeed config)");
  Draft d{Layout{}, {}, path};
  auto pos_int = [&](const json& v, const char* field, int min_v) {
    if (!v.is_number_integer() || v.get<long long>() < min_v || v.get<long long>() > 2'000'000'000)
      fail(path, field, std::string("expected ") + (min_v ? "a positive integer" : "an integer >= 0") +
                            (v.is_string() ? " or \"auto\"" : "") + ", got " + v.dump());
    return v.get<int>();
  };
  // "auto": the HF Trainer fills the value in from its own arguments before
  // DeepSpeed sees the config (huggingface/transformers@3a80c166
  // src/transformers/integrations/deepspeed.py, HfTrainerDeepSpeedConfig.
  // trainer_config_process: micro-batch, accumulation, batch, bf16/fp16;
  // trainer_config_finalize: reduce_bucket_size = hidden_size * hidden_size):
  // here the spec and the other layout sources play the Trainer's part.
  auto is_auto = [](const json& v) { return v.is_string() && v.get<std::string>() == "auto"; };
  // Without ZeRO DeepSpeed all-reduces the gradients after the backward, in
  // line (deepspeed/runtime/engine.py:2970-2982 @edaa7221, _backward_epilogue ->
  // allreduce_gradients); with it, overlap_comm decides (below).
  spec->training.overlap_dp_comm = false;
  // Every top-level key: read below, or walked (listed under -v, or refused with the reason).
  static constexpr const char* kReadTop[] = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                             "zero_optimization", "bf16", "bfloat16", "fp16", "data_types",
                                             "communication_data_type", "tensor_parallel", "optimizer",
                                             "activation_checkpointing", "pipeline", "sparse_gradients",
                                             "disable_allgather", "sequence_parallel_size"};
  for (const auto& item : j.items()) {
    const std::string& k = item.key();  // a name (clang 14 cannot capture a structured binding)
    if (!in_table(kReadTop, k)) walk_ds_top_key(path, k, item.value(), ignored);
  }
  // deepspeed/runtime/config.py: sparse_gradients, disable_allgather (booleans), sequence_parallel_size (Ulysses).
  for (const char* k : {"sparse_gradients", "disable_allgather"}) {
    auto it = j.find(k);
    if (it == j.end() || *it == false) {
      if (it != j.end() && ignored) ignored->push_back(std::string(k) + " (false, the default)");
      continue;
    }
    fail(path, k, std::string(k == std::string("sparse_gradients") ? "sparse gradient all-reduce" : "broadcasts instead of all-gathers") +
                      " are not modelled; expected false");
  }
  if (auto sp = j.find("sequence_parallel_size"); sp != j.end() && !(sp->is_number_integer() && sp->get<long long>() == 1))
    fail(path, "sequence_parallel_size", "DeepSpeed-Ulysses sequence parallelism (an all-to-all over heads) is not modelled; expected 1");
  if (auto opt = j.find("optimizer"); opt != j.end()) {
    // deepspeed/runtime/config.py:586-590 (get_optimizer_name, lower-cased), engine.py:1640-1720 (the optimizers).
    if (!opt->is_object()) fail(path, "optimizer", "expected an object with \"type\"");
    auto ty = opt->find("type");
    if (ty == opt->end() || !ty->is_string()) fail(path, "optimizer.type", "expected a string (Adam, AdamW)");
    std::string name = ty->get<std::string>();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    if (name != "adam" && name != "adamw" && name != "fusedadam")
      fail(path, "optimizer.type", "'" + ty->get<std::string>() + "' is not modelled; expected Adam or AdamW (two fp32 moments)");
    if (spec->training.optimizer != OptimizerKind::kAdam)
      fail(path, "optimizer.type", "Adam conflicts with the spec's training.optimizer " +
                                        std::string(optimizer_name(spec->training.optimizer)));
    spec->training.optimizer_given = true;
    for (const auto& [k, v] : opt->items())
      if (k != "type" && ignored) ignored->push_back("optimizer." + k + " (the update's arithmetic, not its state)");
  }
  if (auto ac = j.find("activation_checkpointing"); ac != j.end() && ac->is_object()) {
    // deepspeed/runtime/activation_checkpointing/config.py: what deepspeed.checkpointing does when the model calls it.
    for (const auto& [k, v] : ac->items()) {
      const std::string field = "activation_checkpointing." + k;
      if (k == "partition_activations" || k == "cpu_checkpointing" || k == "contiguous_memory_optimization") {
        if (v == true)
          fail(path, field, "partitioned, CPU or contiguous checkpoints are not modelled; expected false (recompute comes from the layout)");
      }
      if (ignored) ignored->push_back(field + (v == true ? "" : " (recompute comes from the layout)"));
    }
  }
  if (auto pc = j.find("pipeline"); pc != j.end() && pc->is_object())
    for (const auto& [k, v] : pc->items())
      if (ignored) ignored->push_back("pipeline." + k + " (the pipeline engine's settings: pp and recompute come from the layout)");
  for (const char* prec : {"bf16", "bfloat16", "fp16"}) {
    auto p = j.find(prec);
    if (p == j.end() || !p->is_object()) continue;
    for (const auto& [k, v] : p->items()) {
      const std::string field = std::string(prec) + "." + k;
      if (k == "enabled") continue;
      // deepspeed/runtime/constants.py:148-150, 209: fp32 master weights and gradients kept in bf16/fp16 change the state.
      if ((k == "bf16_master_weights_and_grads" || k == "bf16_optimizer_states" || k == "fp16_master_weights_and_grads") &&
          v == true)
        fail(path, field, "16-bit master weights or optimizer states are not modelled; expected false");
      if (ignored) ignored->push_back(field + " (loss scaling and overflow checks)");
    }
  }
  if (auto z = j.find("zero_optimization"); z != j.end()) {
    if (!z->is_object()) fail(path, "zero_optimization", "expected an object");
    static constexpr const char* kReadZero[] = {
        "stage", "reduce_bucket_size", "overlap_comm", "offload_optimizer", "offload_param", "allgather_bucket_size",
        "prefetch_bucket_size", "stage3_prefetch_bucket_size", "max_live_parameters", "stage3_max_live_parameters",
        "max_reuse_distance", "stage3_max_reuse_distance", "param_persistence_threshold",
        "stage3_param_persistence_threshold"};
    for (const auto& item : z->items()) {
      const std::string& k = item.key();
      if (!in_table(kReadZero, k)) walk_ds_zero_key(path, k, item.value(), ignored);
    }
    // ZeRO-3's gather (Profile::gathered_by_prefetch_bucket), each under its name or its stage3_ alias
    // (populate_by_name, runtime/config_utils.py:105): a count of elements, or "auto" (the HF Trainer's
    // hidden_size² x 0.9 for the prefetch, deepspeed.py trainer_config_finalize; the default for the rest).
    auto elements = [&](const char* name, const char* alias, std::int64_t def, std::int64_t autov) -> std::int64_t {
      auto a = z->find(name), b = z->find(alias);
      if (a != z->end() && b != z->end()) fail(path, std::string("zero_optimization.") + name, std::string("given twice, also as ") + alias);
      auto it = a != z->end() ? a : b;
      if (it == z->end()) return def;
      const std::string field = std::string("zero_optimization.") + (a != z->end() ? name : alias);
      if (is_auto(*it)) return autov;
      if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 1e15)
        fail(path, field, "expected a number of elements >= 0 or \"auto\", got " + it->dump());
      return std::int64_t(it->get<double>());
    };
    const std::int64_t h2 = std::int64_t(spec->model.hidden_size) * spec->model.hidden_size;
    spec->training.zero3_prefetch_bucket_size =
        elements("prefetch_bucket_size", "stage3_prefetch_bucket_size", 50'000'000, std::int64_t(0.9 * double(h2)));
    spec->training.zero3_max_live_parameters = elements("max_live_parameters", "stage3_max_live_parameters", 1'000'000'000, 1'000'000'000);
    spec->training.zero3_max_reuse_distance = elements("max_reuse_distance", "stage3_max_reuse_distance", 1'000'000'000, 1'000'000'000);
    // Parameters under the threshold stay gathered (ds_persist; deepspeed/runtime/zero/parameter_offload.py
    // persistent parameters): the norms and biases, far under 1 % of memory, while it is below the smallest weight
    // matrix; above that whole weights would persist, which is not modelled. "auto": 10 x hidden_size.
    const std::int64_t persist = elements("param_persistence_threshold", "stage3_param_persistence_threshold", 100'000,
                                          10 * std::int64_t(spec->model.hidden_size));
    const std::int64_t smallest = std::int64_t(spec->model.hidden_size) * std::min<std::int64_t>(spec->model.kv_width(), spec->model.hidden_size);
    if (persist >= smallest)
      fail(path, z->contains("param_persistence_threshold") ? "zero_optimization.param_persistence_threshold"
                                                            : "zero_optimization.stage3_param_persistence_threshold",
           "would keep whole weight matrices (" + std::to_string(smallest) + " elements) gathered, which is not modelled; expected under " +
               std::to_string(smallest));
    for (const char* k : {"param_persistence_threshold", "stage3_param_persistence_threshold"})
      if (ignored && z->contains(k))
        ignored->push_back(std::string("zero_optimization.") + k + " (the norms and biases it keeps gathered, under 1 % of memory)");
    if (auto st = z->find("stage"); st != z->end()) {
      d.l.zero = pos_int(*st, "zero_optimization.stage", 0);
      if (d.l.zero > 3) fail(path, "zero_optimization.stage", "expected 0-3, got " + st->dump());
      d.set.zero = true;
    }
    if (auto rb = z->find("reduce_bucket_size"); rb != z->end()) {
      // "auto" = hidden_size² (trainer_config_finalize); a number is elements.
      std::int64_t n = 0;
      if (is_auto(*rb)) n = std::int64_t(spec->model.hidden_size) * spec->model.hidden_size;
      else if (rb->is_number() && rb->get<double>() >= 1 && rb->get<double>() <= 1e15) n = std::int64_t(rb->get<double>());
      else if (rb->is_number() && rb->get<double>() == 0)
        // DeepSpeed's schema allows 0 (ge=0): every gradient tensor then flushes the bucket before it, one
        // reduction per tensor (stage_1_and_2.py), which the bucket-size model does not express.
        fail(path, "zero_optimization.reduce_bucket_size",
             "0 (one reduction per gradient tensor) is not modelled; expected a positive number of elements or \"auto\"");
      else fail(path, "zero_optimization.reduce_bucket_size", "expected a positive number of elements or \"auto\", got " + rb->dump());
      spec->training.grad_bucket_params = n;
      spec->training.grad_bucket_params_given = true;
    }
    if (auto ab = z->find("allgather_bucket_size"); ab != z->end() && !is_auto(*ab)) {
      // ZeRO-1/2's post-step all-gather of the updated partitions, in allgather_bucket_size buckets
      // (stage_1_and_2.py:2394-2401): Training::gather_bucket_params.
      if (!ab->is_number() || ab->get<double>() < 1 || ab->get<double>() > 1e15)
        fail(path, "zero_optimization.allgather_bucket_size", "expected a positive number of elements, got " + ab->dump());
      spec->training.gather_bucket_params = std::int64_t(ab->get<double>());
    }
    // deepspeed/runtime/zero/config.py:138, 383-385 @edaa7221: overlap_comm
    // defaults to true at stage 3 only.
    spec->training.overlap_dp_comm = d.l.zero == 3;
    if (auto oc = z->find("overlap_comm"); oc != z->end() && !is_auto(*oc) && !oc->is_null()) {  // null: the default
      if (!oc->is_boolean()) fail(path, "zero_optimization.overlap_comm", "expected true, false or \"auto\", got " + oc->dump());
      spec->training.overlap_dp_comm = oc->get<bool>();
    }
    for (const char* off : {"offload_optimizer", "offload_param"}) {
      auto o = z->find(off);
      if (o == z->end() || !o->is_object()) continue;
      const std::string field = std::string("zero_optimization.") + off;
      auto dev = o->find("device");
      if (dev != o->end() && !dev->is_string())
        fail(path, field + ".device", "expected a string (\"none\", \"cpu\" or \"nvme\"), got " + dev->dump());
      if (dev != o->end() && dev->get<std::string>() != "none")
        fail(path, field, "CPU/NVMe offload is not modelled; expected device \"none\"");
    }
  }
  // DeepSpeed AutoTP (deepspeedai/DeepSpeed deepspeed/runtime/tensor_parallel/config.py, TPTrainingConfig.
  // autotp_size): linear layers split by columns and rows with an all-reduce, Megatron's tensor
  // parallelism without sequence parallelism. Issue 46: it was read as tp = 1.
  if (auto tpc = j.find("tensor_parallel"); tpc != j.end()) {
    if (!tpc->is_object()) fail(path, "tensor_parallel", "expected an object");
    if (auto a = tpc->find("autotp_size"); a != tpc->end() && !is_auto(*a)) {
      d.l.tp = pos_int(*a, "tensor_parallel.autotp_size", 1), d.set.tp = true;
      if (d.l.tp > kMaxGpus) fail(path, "tensor_parallel.autotp_size", "expected at most " + std::to_string(kMaxGpus));
    }
  }
  if (auto mb = j.find("train_micro_batch_size_per_gpu"); mb != j.end() && !is_auto(*mb))
    d.l.mbs = pos_int(*mb, "train_micro_batch_size_per_gpu", 1), d.set.mbs = true;
  if (d.l.mbs > kMaxBatch)
    fail(path, "train_micro_batch_size_per_gpu", "expected at most " + std::to_string(kMaxBatch));
  for (const char* prec : {"bf16", "fp16"}) {
    auto p = j.find(prec);
    if (p == j.end() || !p->is_object()) continue;
    auto en = p->find("enabled");
    if (en == p->end() || is_auto(*en)) continue;  // "auto": the spec's precision (--bf16 / --fp16 of the Trainer)
    if (!en->is_boolean())
      fail(path, std::string(prec) + ".enabled", "expected true, false or \"auto\", got " + en->dump());
    if (en->get<bool>() && std::string(prec) == "bf16" && !spec->cluster.gpu.bf16)
      fail(path, "bf16.enabled", no_bf16_reason(spec->cluster.gpu) + "; use fp16");
    if (en->get<bool>()) {
      set_precision(&spec->training, std::string(prec) == "bf16" ? DType::kBf16 : DType::kFp16);
      spec->training.precision_given = true;
    }
  }
  // A dtype string of the config: "fp32", "bf16" or "fp16".
  auto dtype_value = [&](const auto& v, const char* field) {
    const std::string t = v.is_string() ? v.template get<std::string>() : "";
    if (t == "fp32") return DType::kFp32;
    if (t == "bf16") return DType::kBf16;
    if (t != "fp16") fail(path, field, "expected \"fp32\", \"bf16\" or \"fp16\", got " + v.dump());
    return DType::kFp16;
  };
  if (auto dt = j.find("data_types"); dt != j.end() && dt->is_object()) {
    // deepspeed/runtime/engine.py:1994-1996: bf16 with grad_accum_dtype fp32
    // and ZeRO-1 runs the BF16_Optimizer (fp32 gradient buffer).
    if (auto ga = dt->find("grad_accum_dtype"); ga != dt->end()) {
      spec->training.grad_dtype = dtype_value(*ga, "data_types.grad_accum_dtype");
      if (spec->training.grad_dtype == DType::kBf16 && !spec->cluster.gpu.bf16)
        fail(path, "data_types.grad_accum_dtype",
             no_bf16_reason(spec->cluster.gpu));
      spec->training.grad_dtype_given = true;
    }
  }
  // deepspeed/runtime/config.py:209-223, constants.py:283 @edaa7221: the dtype
  // gradients are reduced in, when given (else the gradients' own).
  if (auto cd = j.find("communication_data_type"); cd != j.end() && !cd->is_null()) {
    spec->training.grad_reduce_dtype = dtype_value(*cd, "communication_data_type");
    if (spec->training.grad_reduce_dtype == DType::kBf16 && !spec->cluster.gpu.bf16)
      fail(path, "communication_data_type", no_bf16_reason(spec->cluster.gpu));
    spec->training.grad_reduce_dtype_given = true;
  }
  if (auto tb = j.find("train_batch_size"); tb != j.end() && !is_auto(*tb))
    spec->training.global_batch_size = pos_int(*tb, "train_batch_size", 1), spec->training.global_batch_size_given = true;
  if (spec->training.global_batch_size > kMaxBatch)
    fail(path, "train_batch_size", "expected at most " + std::to_string(kMaxBatch));
  else if (auto ga = j.find("gradient_accumulation_steps");
           ga != j.end() && !is_auto(*ga) && d.set.mbs && (j.find("train_batch_size") == j.end() || is_auto(j["train_batch_size"]))) {
    // train_batch_size = micro × accumulation × data-parallel ranks; dp comes
    // from the GPU count once tp and pp are known (see below).
    d.accumulation = pos_int(*ga, "gradient_accumulation_steps", 1);
  } else if (ga != j.end() && !is_auto(*ga)) {
    pos_int(*ga, "gradient_accumulation_steps", 1);
  }
  return d;
}

void merge(Draft* into, const Draft& from) {
  auto field = [&](bool set_from, bool* set_into, auto get, const char* name) {
    if (!set_from) return;
    if (*set_into && get(into->l) != get(from.l))
      fail(from.source, name,
           "conflicts with " + into->source + " (" + std::to_string(get(into->l)) + " vs " +
               std::to_string(get(from.l)) + ")");
    *set_into = true;
  };
  field(from.set.dp, &into->set.dp, [](const Layout& l) { return l.dp; }, "dp");
  field(from.set.tp, &into->set.tp, [](const Layout& l) { return l.tp; }, "tp");
  field(from.set.cp, &into->set.cp, [](const Layout& l) { return l.cp; }, "cp");
  field(from.set.pp, &into->set.pp, [](const Layout& l) { return l.pp; }, "pp");
  field(from.set.vpp, &into->set.vpp, [](const Layout& l) { return l.vpp; }, "vpp");
  field(from.set.sp, &into->set.sp, [](const Layout& l) { return int(l.sp); }, "sp");
  field(from.set.zero, &into->set.zero, [](const Layout& l) { return l.zero; }, "zero");
  field(from.set.recompute, &into->set.recompute, [](const Layout& l) { return int(l.recompute); }, "recompute");
  field(from.set.mbs, &into->set.mbs, [](const Layout& l) { return l.mbs; }, "mbs");
  field(from.set.schedule, &into->set.schedule, [](const Layout& l) { return int(l.schedule); }, "schedule");
  field(from.set.recompute_method, &into->set.recompute_method,
        [](const Layout& l) { return int(l.recompute_method); }, "recompute_method");
  field(from.set.recompute_layers, &into->set.recompute_layers,
        [](const Layout& l) { return l.recompute_layers; }, "recompute_layers");
  field(from.set.first_stage_layers, &into->set.first_stage_layers,
        [](const Layout& l) { return l.first_stage_layers; }, "first_stage_layers");
  field(from.set.last_stage_layers, &into->set.last_stage_layers,
        [](const Layout& l) { return l.last_stage_layers; }, "last_stage_layers");
  field(from.set.balance, &into->set.balance, [](const Layout& l) { return int(l.balance); }, "balance");
  field(from.set.ep, &into->set.ep, [](const Layout& l) { return l.ep; }, "ep");
  field(from.set.etp, &into->set.etp, [](const Layout& l) { return l.etp; }, "etp");
  field(from.set.microbatch_group, &into->set.microbatch_group, [](const Layout& l) { return l.microbatch_group; },
        "microbatch_group");
  if (from.set.dp) into->l.dp = from.l.dp;
  if (from.set.tp) into->l.tp = from.l.tp;
  if (from.set.cp) into->l.cp = from.l.cp;
  if (from.set.pp) into->l.pp = from.l.pp;
  if (from.set.vpp) into->l.vpp = from.l.vpp;
  if (from.set.sp) into->l.sp = from.l.sp;
  if (from.set.zero) into->l.zero = from.l.zero;
  if (from.set.recompute) into->l.recompute = from.l.recompute;
  if (from.set.mbs) into->l.mbs = from.l.mbs;
  if (from.set.schedule) into->l.schedule = from.l.schedule;
  if (from.set.recompute_method) into->l.recompute_method = from.l.recompute_method;
  if (from.set.recompute_layers) into->l.recompute_layers = from.l.recompute_layers;
  if (from.set.first_stage_layers) into->l.first_stage_layers = from.l.first_stage_layers;
  if (from.set.last_stage_layers) into->l.last_stage_layers = from.l.last_stage_layers;
  if (from.set.balance) into->l.balance = from.l.balance;
  if (from.set.ep) into->l.ep = from.l.ep;
  if (from.set.etp) into->l.etp = from.l.etp;
  if (from.set.microbatch_group) into->l.microbatch_group = from.l.microbatch_group;
  if (into->source.empty()) into->source = from.source;
}

}  // namespace

Layout layout_from_sources(Spec* spec, const std::string& spec_file, const LayoutRequest& req) {
  Draft d{Layout{}, {}, ""};
  const bool any = req.layout || req.megatron_args || req.deepspeed_config;
  const std::optional<std::string>& text = req.layout ? req.layout : spec->default_layout;
  if (text && (req.layout || !any)) {
    Draft s{Layout{}, {}, req.layout ? "--layout" : spec_file};
    try {
      parse_layout_into(*text, &s.l, &s.set);
    } catch (const LayoutError& e) {
      fail(s.source, "layout." + e.field(), e.what());
    }
    merge(&d, s);
  }
  if (req.megatron_args) merge(&d, from_megatron(*req.megatron_args, spec, req.ignored_flags, req.framework_defaults));
  int ds_accumulation = 0;
  if (req.deepspeed_config) {
    const Draft ds = from_deepspeed(*req.deepspeed_config, spec, req.ignored_flags);
    merge(&d, ds);
    ds_accumulation = ds.accumulation;
  }
  if (!text && !any)
    fail(spec_file, "layout",
         "no layout given; pass --layout, --megatron-args or --deepspeed-config, or set layout: "
         "in the spec");
  Layout l = d.l;
  if (ds_accumulation) {
    // Global batch from the DeepSpeed identity: micro × accumulation × dp.
    const int gpus = spec->num_gpus();
    const std::int64_t tp_pp = std::int64_t(l.tp) * l.pp * (std::int64_t(l.tp) * l.pp <= gpus ? l.cp : 1);
    if (l.dp == 0 && tp_pp <= gpus && gpus % tp_pp == 0) l.dp = int(gpus / tp_pp);
    const std::int64_t gbs = std::int64_t(l.mbs) * ds_accumulation * std::max(l.dp, 1);  // each <= 2^31
    if (gbs > kMaxBatch)
      fail(*req.deepspeed_config, "gradient_accumulation_steps",
           "train_micro_batch_size_per_gpu x gradient_accumulation_steps x dp = " + std::to_string(gbs) +
               " sequences; expected at most " + std::to_string(kMaxBatch));
    spec->training.global_batch_size = int(gbs);
    spec->training.global_batch_size_given = true;
  }
  if (auto p = resolve_layout(*spec, &l, /*check_tp_span=*/false))
    fail(spec_file, "layout." + p->field, p->message);
  return l;
}

std::string megatron_moe_layer_freq(const Model& m) {
  std::string o;
  int run = 0, n = 0;
  bool all = true;
  for (int i = 0; i <= m.num_layers; ++i) {
    const int v = i < m.num_layers ? int(m.is_moe_layer(i)) : -1;
    if (i < m.num_layers) all = all && v == 1;
    if (i > 0 && v != run) {
      o += fmt::format("{}[{}]*{}", o.empty() ? "" : "+", run, n);
      n = 0;
    }
    run = v, ++n;
  }
  return all ? std::string("1") : fmt::format("({})", o);
}

}  // namespace paraplan
