#include "planner/emit.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "planner/layout_source.hpp"
#include "planner/spec_error.hpp"

namespace paraplan {

bool parse_emit_target(const std::string& name, EmitTarget* out) {
  if (name == "megatron") *out = EmitTarget::kMegatron;
  else if (name == "deepspeed") *out = EmitTarget::kDeepSpeed;
  else if (name == "torchtitan") *out = EmitTarget::kTorchtitan;
  else if (name == "nanotron") *out = EmitTarget::kNanotron;
  else return false;
  return true;
}

Framework emit_framework(EmitTarget t) {
  switch (t) {
    case EmitTarget::kMegatron: return Framework::kMegatron;
    case EmitTarget::kDeepSpeed: return Framework::kDeepSpeed;
    case EmitTarget::kTorchtitan: return Framework::kFsdp;
    case EmitTarget::kNanotron: return Framework::kNanotron;
  }
  return Framework::kMegatron;
}

namespace {

int microbatches(const Spec& s, const Layout& l) {
  return s.training.global_batch_size / std::max(1, l.dp * l.mbs);
}

// Layers on an inner pipeline rank when the first/last ranks are uneven.
int inner_stage_layers(const Spec& s, const Layout& l) {
  const int inner = l.pp - int(l.first_stage_layers > 0) - int(l.last_stage_layers > 0);
  const int rest = s.model.num_layers - l.first_stage_layers - l.last_stage_layers;
  return inner > 0 ? rest / inner : 0;
}

// Megatron-LM's recompute flags for the layout (also what Megatron-DeepSpeed takes).
std::string recompute_flags(const Layout& l) {
  if (l.recompute == Recompute::kSelective) return " --recompute-activations";
  if (l.recompute == Recompute::kFull)
    return fmt::format(" --recompute-granularity full --recompute-method {} --recompute-num-layers {}",
                       l.recompute_method == RecomputeMethod::kBlock ? "block" : "uniform", l.recompute_layers);
  return "";
}

const char* precision_flag(DType d) { return d == DType::kFp16 ? "--fp16" : d == DType::kBf16 ? "--bf16" : ""; }

}  // namespace

std::string emit_unsupported(EmitTarget t, const Spec& s, const Layout& l) {
  const bool cost = l.balance == StageBalance::kCost && l.pp > 1;
  switch (t) {
    case EmitTarget::kMegatron:
      if (l.schedule == Schedule::kGPipe && l.pp > 1)
        return "Megatron-LM has no GPipe schedule (its pipeline runs 1F1B, interleaved when vpp > 1: "
               "megatron/core/pipeline_parallel/schedules.py)";
      if (cost) return "balance=cost is nanotron's pipeline split; Megatron-LM splits by layers";
      return "";
    case EmitTarget::kDeepSpeed:
      if (s.model.is_moe())
        return "DeepSpeed MoE sets expert parallelism in the model code (deepspeed.moe.layer.MoE ep_size), not in a DeepSpeed config";
      // deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/pipe/engine.py:77.
      if (l.pp > 1 && l.zero >= 2) return "DeepSpeed's pipeline engine refuses ZeRO-2 and ZeRO-3 (deepspeed/runtime/pipe/engine.py:77)";
      if (l.vpp > 1) return "DeepSpeed's pipeline engine has no interleaved (virtual) stages";
      if (l.uneven() || cost) return "uneven pipeline stages are set in the model code (PipelineModule partition_method), not in a DeepSpeed config";
      if (l.cp > 1) return "context parallelism is not a DeepSpeed config setting";
      return "";
    case EmitTarget::kTorchtitan:
      if (l.zero == 1) return "torchtitan shards with FSDP2 (ZeRO-2 or ZeRO-3) or replicates (ZeRO-0); it has no ZeRO-1";
      if (cost) return "balance=cost is nanotron's pipeline split; torchtitan splits by layers";
      if (l.uneven() && l.vpp > 1) return "uneven stages with vpp > 1: torchtitan's first/last_stage_less_layers count virtual stages";
      if (l.uneven() && l.pp < 3) return "uneven stages need pp >= 3 here (an inner stage sets the even size)";
      if (l.schedule == Schedule::kGPipe && l.vpp > 1) return "GPipe with vpp > 1 (LoopedBFS) is not modelled";
      if (l.microbatch_group > 0) return "microbatch_group is Megatron-LM's; torchtitan's Interleaved1F1B groups by pp";
      if (l.recompute == Recompute::kFull && l.partial_recompute_set())
        return "torchtitan's full activation checkpointing covers every block; partial recompute is Megatron-LM's";
      return "";
    case EmitTarget::kNanotron:
      if (s.model.is_moe()) return "nanotron has no mixture-of-experts layer in its library (huggingface/nanotron@67c5ebb6: examples/moe/ only)";
      if (l.zero > 1) return "nanotron shards the optimizer state only (zero_stage 0 or 1)";
      if (l.vpp > 1) return "nanotron has no interleaved (virtual) pipeline stages";
      if (l.cp > 1) return "nanotron's ParallelismArgs has no context parallelism";
      if (l.uneven()) return "nanotron splits stages by compute cost (balance=cost), not by first/last stage layers";
      if (l.recompute == Recompute::kFull && l.partial_recompute_set())
        return "nanotron's recompute_layer covers every layer; partial recompute is Megatron-LM's";
      return "";
  }
  return "";
}

Emitted emit_launch(EmitTarget t, const Spec& s, const Layout& l) {
  if (const std::string why = emit_unsupported(t, s, l); !why.empty())
    throw SpecError("--emit", 0, "", "cannot express " + to_string(l) + ": " + why);
  const Training& tr = s.training;
  Emitted e;
  const int gpus = s.num_gpus();
  const int m = microbatches(s, l);
  if (t == EmitTarget::kMegatron) {
    // NVIDIA/Megatron-LM@d98e8a64 megatron/training/arguments.py (the flags
    // --megatron-args reads back, planner/layout_source.cpp).
    std::string o = fmt::format("--tensor-model-parallel-size {} --pipeline-model-parallel-size {}", l.tp, l.pp);
    if (l.vpp > 1) o += fmt::format(" --num-virtual-stages-per-pipeline-rank {}", l.vpp);
    if (l.microbatch_group > 0)
      o += fmt::format(" --microbatch-group-size-per-virtual-pipeline-stage {}", l.microbatch_group);
    StageSplit split;
    if (uneven_form(s.model.num_layers, l) == UnevenForm::kAccountFor && stage_split(s.model.num_layers, l, &split)) {
      // A rank one layer short of the others with interleaving: only this way
      // (transformer_config.py:2370-2410; uneven_form), for the short end(s).
      if (split.first < split.most()) o += " --account-for-embedding-in-pipeline-split";
      if (split.last < split.most()) o += " --account-for-loss-in-pipeline-split";
    } else {
      if (l.first_stage_layers) o += fmt::format(" --decoder-first-pipeline-num-layers {}", l.first_stage_layers);
      if (l.last_stage_layers) o += fmt::format(" --decoder-last-pipeline-num-layers {}", l.last_stage_layers);
    }
    if (l.cp > 1) o += fmt::format(" --context-parallel-size {}", l.cp);
    if (s.model.is_moe()) {
      o += fmt::format(" --expert-model-parallel-size {} --expert-tensor-parallel-size {}", l.ep, l.expert_tp());
      // Always written: Megatron's default at d98e8a64 is allgather (transformer_config.py:891), paraplan's alltoall.
      o += tr.moe_dispatcher == Training::MoeDispatcher::kAllGather ? " --moe-token-dispatcher-type allgather"
                                                                    : " --moe-token-dispatcher-type alltoall";
      if (tr.moe_ep_overlap) o += " --overlap-moe-expert-parallel-comm";
      // Megatron's default makes every layer MoE (arguments.py:3520): the model's dense layers said.
      if (const std::string f = megatron_moe_layer_freq(s.model); f != "1") o += " --moe-layer-freq " + f;
    }
    if (l.sp) o += " --sequence-parallel";
    if (l.zero == 1) o += " --use-distributed-optimizer";
    // Megatron-FSDP (megatron/core/distributed/distributed_data_parallel_config.py:90; arguments.py:3190).
    if (l.zero >= 2)
      // Megatron-FSDP asserts the fsdp_dtensor checkpoint format (arguments.py:1169-1170 at d98e8a64).
      o += std::string(" --use-megatron-fsdp --use-distributed-optimizer --data-parallel-sharding-strategy ") +
           (l.zero == 2 ? "optim_grads" : "optim_grads_params") + " --ckpt-format fsdp_dtensor";
    o += recompute_flags(l);
    o += fmt::format(" --micro-batch-size {} --global-batch-size {} --seq-length {}", l.mbs, tr.global_batch_size,
                     tr.seq_length);
    if (const char* p = precision_flag(tr.precision); *p) o += std::string(" ") + p;
    // Always written: without them Megatron trains with dropout 0.1 (transformer_config.py:188, 191), a
    // different run from the one predicted for a model without dropout (issue 46).
    o += fmt::format(" --attention-dropout {:g} --hidden-dropout {:g}", s.model.attention_dropout, s.model.hidden_dropout);
    // Megatron keeps fp32 main_grads unless told (grad_dtype_given: the megatron profile's rule).
    if (tr.grad_dtype_given && tr.grad_dtype == DType::kBf16 && tr.precision == DType::kBf16) o += " --grad-reduce-in-bf16";
    if (tr.fp8) o += " --fp8-format hybrid";
    if (tr.fp8_param_gather) o += " --fp8-param-gather";
    if (tr.overlap_dp_comm && l.dp_cp() > 1)
      o += l.zero >= 1 && tr.overlap_param_gather ? " --overlap-grad-reduce --overlap-param-gather" : " --overlap-grad-reduce";
    if (tr.tp_comm_overlap && l.sp) o += " --tp-comm-overlap";
    if (!tr.overlap_p2p_comm && l.vpp > 1) o += " --no-overlap-p2p-communication";
    if (tr.overlap_p2p_comm && tr.overlap_p2p_comm_warmup_flush && l.vpp > 1) o += " --overlap-p2p-communication-warmup-flush";
    o += tr.flash_attention ? " --attention-backend flash" : " --attention-backend unfused";
    if (!tr.gradient_accumulation_fusion) o += " --no-gradient-accumulation-fusion";
    if (tr.cross_entropy_fusion) o += " --cross-entropy-loss-fusion";
    // Megatron refuses --deterministic-mode beside either fusion above (determinism.py:24).
    if (tr.deterministic && !tr.cross_entropy_fusion && !(tr.tp_comm_overlap && l.sp)) o += " --deterministic-mode";
    e.text = o + "\n";
    e.notes.push_back(fmt::format("launch on {} GPUs: Megatron-LM derives dp = GPUs / (tp x pp x cp) = {}", gpus, l.dp));
    // NVIDIA/Megatron-LM@d98e8a64 megatron/training/arguments.py: Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS
    // != 1 (:1166-1167); otherwise, with tp or cp > 1 on GPUs before Blackwell (compute capability < 10), it
    // asserts == 1 (:1453-1478; EP overlap only warns).
    if (l.zero >= 2)
      e.notes.push_back("environment: leave CUDA_DEVICE_MAX_CONNECTIONS unset or above 1 (Megatron-FSDP asserts it, "
                        "arguments.py:1166-1167; with tp/cp > 1 it warns that those prefer 1, :1456-1464)");
    else if (l.tp > 1 || l.cp > 1)
      e.notes.push_back("environment: export CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron-LM asserts it with tp or cp > 1 "
                        "on GPUs before Blackwell, arguments.py:1475-1478)");
    return e;
  }
  if (t == EmitTarget::kDeepSpeed) {
    // deepspeedai/DeepSpeed@edaa7221 docs/_pages/config-json.md; read back by --deepspeed-config.
    nlohmann::ordered_json j;
    j["train_batch_size"] = tr.global_batch_size;
    j["train_micro_batch_size_per_gpu"] = l.mbs;
    j["gradient_accumulation_steps"] = m;
    if (tr.precision == DType::kBf16) j["bf16"] = {{"enabled", true}};
    if (tr.precision == DType::kFp16) j["fp16"] = {{"enabled", true}};
    nlohmann::ordered_json z;
    z["stage"] = l.zero;
    if (l.zero >= 1) z["overlap_comm"] = tr.overlap_dp_comm;
    if (tr.grad_bucket_params_given) z["reduce_bucket_size"] = tr.grad_bucket_params;
    j["zero_optimization"] = z;
    if (tr.grad_dtype_given && tr.precision == DType::kBf16)
      j["data_types"] = {{"grad_accum_dtype", dtype_name(tr.grad_dtype)}};
    if (tr.grad_reduce_dtype_given) j["communication_data_type"] = dtype_name(tr.grad_reduce_dtype);
    e.text = j.dump(2) + "\n";
    e.notes.push_back(fmt::format("launch on {} GPUs; DeepSpeed checks train_batch_size = micro x accumulation x dp "
                                  "({} = {} x {} x {})", gpus, tr.global_batch_size, l.mbs, m, l.dp));
    std::string outside;
    if (l.tp > 1) outside += fmt::format(" --tensor-model-parallel-size {}", l.tp);
    if (l.pp > 1) outside += fmt::format(" --pipeline-model-parallel-size {}", l.pp);
    if (l.sp) outside += " --sequence-parallel";
    outside += recompute_flags(l);
    if (!outside.empty())
      e.notes.push_back("not DeepSpeed config keys; with Megatron-DeepSpeed pass:" + outside);
    return e;
  }
  if (t == EmitTarget::kTorchtitan) {
    // pytorch/torchtitan@b5bcd76c reads no TOML: a run is a Python function
    // returning Trainer.Config (torchtitan/config/README.md "Configuration";
    // torchtitan/config/manager.py:48-91, --module/--config), the recipes
    // derive one from a baseline and set its fields (config_registry.py:194-230).
    // The fields: torchtitan/config/configs.py:121-290 (ParallelismConfig),
    // :36-62 (TrainingConfig); the activation checkpointing policy:
    // torchtitan/distributed/activation_checkpoint.py:332-337 (SelectiveAC,
    // FullAC, or None).
    std::string o = fmt::format("# {} on {} GPUs (paraplan)\n", to_string(l), gpus);
    o += "# A torchtitan configuration (pytorch/torchtitan@b5bcd76c reads Python, not TOML: torchtitan/config/README.md).\n";
    o += "# Apply it to your model's baseline, e.g. def my_run() -> Trainer.Config: return paraplan_layout(llama3_8b()),\n";
    o += fmt::format("# then NGPU={} MODULE=<your module> CONFIG=my_run ./run_train.sh\n", gpus);
    o += "from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC\n";
    o += "from torchtitan.trainer import Trainer\n\n\n";
    o += "def paraplan_layout(config: Trainer.Config) -> Trainer.Config:\n";
    auto set = [&o](const char* section, const char* key, const std::string& value) {
      o += fmt::format("    config.{}.{} = {}\n", section, key, value);
    };
    auto num = [](std::int64_t v) { return fmt::format("{}", v); };
    auto str = [](const char* v) { return fmt::format("\"{}\"", v); };
    set("parallelism", "data_parallel_replicate_degree", num(l.zero == 0 ? l.dp : 1));
    set("parallelism", "data_parallel_shard_degree", num(l.zero == 0 ? 1 : l.dp));
    if (l.zero >= 2) set("parallelism", "fsdp_reshard_after_forward", str(l.zero == 3 ? "always" : "never"));
    set("parallelism", "tensor_parallel_degree", num(l.tp));
    if (l.tp > 1) set("parallelism", "enable_sequence_parallel", l.sp ? "True" : "False");
    set("parallelism", "context_parallel_degree", num(l.cp));
    // configs.py:282-290: EP borrows ranks from FSDP (and TP): efsdp = dp_shard * cp * tp / ep.
    if (s.model.is_moe()) set("parallelism", "expert_parallel_degree", num(l.ep));
    set("parallelism", "pipeline_parallel_degree", num(l.pp));
    if (l.pp > 1) {
      set("parallelism", "pipeline_parallel_schedule",
          str(l.schedule == Schedule::kGPipe ? "GPipe" : l.vpp > 1 ? "Interleaved1F1B" : "1F1B"));
      set("parallelism", "pipeline_parallel_layers_per_stage",
          num(l.uneven() ? inner_stage_layers(s, l) : s.model.num_layers / (l.pp * l.vpp)));
      // torchtitan's defaults are 1 (configs.py:197-208): even stages say 0.
      const int even = l.uneven() ? inner_stage_layers(s, l) : 0;
      set("parallelism", "pipeline_parallel_first_stage_less_layers", num(l.first_stage_layers ? even - l.first_stage_layers : 0));
      set("parallelism", "pipeline_parallel_last_stage_less_layers", num(l.last_stage_layers ? even - l.last_stage_layers : 0));
      set("parallelism", "num_pp_microbatches", num(m));
    }
    set("training", "num_tokens_per_microbatch_per_dp_rank", num(std::int64_t(l.mbs) * tr.seq_length));
    set("training", "num_tokens_per_train_step", num(std::int64_t(tr.global_batch_size) * tr.seq_length));
    set("training", "max_context_length", num(tr.seq_length));
    // SelectiveAC is torchtitan's per-op policy (activation_checkpoint.py:185-289), what
    // recompute=selective means under the fsdp profile; None disables checkpointing.
    o += fmt::format("    config.activation_checkpoint = {}\n",
                     l.recompute == Recompute::kFull        ? "FullAC.Config()"
                     : l.recompute == Recompute::kSelective ? "SelectiveAC.Config()"
                                                            : "None");
    o += "    return config\n";
    e.text = o;
    e.notes.push_back(fmt::format("launch on {} GPUs (NGPU={})", gpus, gpus));
    return e;
  }
  // nanotron: huggingface/nanotron@67c5ebb6 src/nanotron/config/parallelism_config.py:15-53,
  // config.py:247-250 (TokensArgs), :313 (OptimizerArgs.zero_stage).
  std::string o = fmt::format("# {} on {} GPUs (paraplan)\n", to_string(l), gpus);
  o += "parallelism:\n";
  o += fmt::format("  dp: {}\n  tp: {}\n  pp: {}\n", l.dp, l.tp, l.pp);
  o += fmt::format("  pp_engine: {}\n", l.schedule == Schedule::kGPipe ? "afab" : "1f1b");
  o += fmt::format("  tp_mode: {}\n", l.sp ? "REDUCE_SCATTER" : "ALL_REDUCE");
  o += fmt::format("  tp_linear_async_communication: {}\n", l.sp && tr.tp_comm_overlap ? "true" : "false");
  o += fmt::format("  recompute_layer: {}\n", l.recompute == Recompute::kFull ? "true" : "false");
  o += "  expert_parallel_size: 1\n";
  o += "tokens:\n";
  o += fmt::format("  sequence_length: {}\n  micro_batch_size: {}\n  batch_accumulation_per_replica: {}\n",
                   tr.seq_length, l.mbs, m);
  o += fmt::format("optimizer:\n  zero_stage: {}\n", l.zero);
  e.text = o;
  e.notes.push_back(fmt::format("launch on {} GPUs (dp x tp x pp = {} x {} x {}); merge these keys into the run's "
                                "YAML (tokens.train_steps and the optimizer's other keys stay yours)",
                                gpus, l.dp, l.tp, l.pp));
  if (l.recompute == Recompute::kSelective)
    e.notes.push_back("recompute=selective: nanotron has no selective recompute; its flash attention keeps no s x s "
                      "scores, which is what selective recompute saves");
  return e;
}

}  // namespace paraplan
