// A parallel layout and its one canonical text form:
//   dp=8,tp=8,pp=4,vpp=2,sp=1,zero=1,recompute=selective,mbs=1,schedule=1f1b
// (with experts: dp=64,tp=1,ep=64,etp=1,pp=16,...)
// followed, only when set, by first_stage_layers=N and last_stage_layers=N
// (uneven pipeline stages, Megatron-LM --decoder-first/last-pipeline-num-layers)
// and balance=cost (nanotron's compute-cost split of the pipeline), and
// microbatch_group=N (Megatron-LM --microbatch-group-size-per-virtual-pipeline-stage).
// Interleaving is 1F1B with vpp > 1 (as in Megatron-LM); `schedule=interleaved`
// is accepted on input and printed as `1f1b` with its vpp.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace paraplan {

enum class Recompute { kNone, kSelective, kFull };
// Which layers full recomputation covers (Megatron-LM --recompute-method,
// NVIDIA/Megatron-LM@d98e8a64 megatron/core/recompute.py:157-180): uniform
// checkpoints the input of every group of recompute_layers layers of a model
// chunk and re-runs all of them; block checkpoints the first recompute_layers
// layers of each model chunk, one by one, and keeps the rest in full.
enum class RecomputeMethod { kUniform, kBlock };
enum class Schedule { k1F1B, kGPipe };
// How transformer layers are assigned to pipeline ranks: evenly, with
// first/last_stage_layers (Megatron-LM), or by compute cost with the output
// layer counted (nanotron's build_model: each rank fills to its share of the
// summed block costs; printed balance=cost).
enum class StageBalance { kLayers, kCost };

struct Layout {
  int dp = 0;  // 0 = derive from the GPU count
  int tp = 1;
  // Context parallelism: the sequence split over cp ranks, attention as a ring
  // exchange of K and V (Megatron-LM --context-parallel-size, Transformer
  // Engine's p2p context parallelism). Printed only when > 1, after tp.
  int cp = 1;
  int pp = 1;
  int vpp = 1;  // virtual stages (model chunks) per pipeline rank
  bool sp = false;
  int zero = 0;
  Recompute recompute = Recompute::kNone;
  int mbs = 1;
  Schedule schedule = Schedule::k1F1B;
  // Uneven pipeline stages: transformer layers on the first / last pipeline
  // rank (all its model chunks); 0 = the even split. The other stages share
  // the remaining layers evenly (Megatron-LM get_num_layers_to_build).
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  // With recompute = full: uniform groups of recompute_layers, or the first
  // recompute_layers of each chunk (block). Printed only when not uniform, 1.
  RecomputeMethod recompute_method = RecomputeMethod::kUniform;
  int recompute_layers = 1;
  StageBalance balance = StageBalance::kLayers;
  // Mixtures of experts (Megatron-LM --expert-model-parallel-size,
  // --expert-tensor-parallel-size): the routed experts of each MoE layer split
  // over ep ranks, each expert's matrices over etp ranks. Megatron-core lays
  // the expert grid over the same tp x cp x dp ranks of a pipeline stage as
  // etp x ep x edp (NVIDIA/Megatron-LM@d98e8a64 megatron/core/parallel_state.py:
  // 873-895), so etp x ep must divide tp x cp x dp. etp = 0: the same as tp
  // (arguments.py:587-588); resolve_layout sets it for a mixture of experts.
  // Printed after tp/cp when the model has experts.
  int ep = 1;
  int etp = 0;
  // The interleaved schedule's micro-batches run per model chunk in groups of
  // this many (Megatron-LM --microbatch-group-size-per-virtual-pipeline-stage,
  // in [pp, micro-batches], NVIDIA/Megatron-LM@d98e8a64 megatron/core/
  // pipeline_parallel/schedules.py:1160-1179); 0 = pp, Megatron's default.
  // Printed only when set.
  int microbatch_group = 0;
  int group() const { return microbatch_group > 0 ? microbatch_group : pp; }

  int gpus() const { return dp * tp * cp * pp; }
  // Ranks that share gradients and optimizer shards: dp x cp (Megatron's dp_cp group).
  int dp_cp() const { return dp * cp; }
  // The expert tensor-parallel size (tp when not set) and the expert data-
  // parallel size edp = tp x cp x dp / (etp x ep): the ranks that share an
  // expert's gradients and optimizer shards (parallel_state.py:880).
  int expert_tp() const { return etp > 0 ? etp : tp; }
  int edp() const { return int(std::int64_t(dp) * tp * cp / (std::int64_t(expert_tp()) * ep)); }
  bool interleaved() const { return schedule == Schedule::k1F1B && vpp > 1; }
  bool uneven() const { return first_stage_layers > 0 || last_stage_layers > 0; }
  bool partial_recompute_set() const { return recompute_method != RecomputeMethod::kUniform || recompute_layers != 1; }
  bool operator==(const Layout&) const = default;
};

// A field that could not be parsed: `field` names it, `what()` says what was expected.
class LayoutError : public std::runtime_error {
 public:
  LayoutError(std::string field, const std::string& msg)
      : std::runtime_error(msg), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

const char* recompute_name(Recompute r);
const char* schedule_name(Schedule s);
const char* recompute_method_name(RecomputeMethod m);
bool parse_recompute(std::string_view text, Recompute* out);
bool parse_schedule(std::string_view text, Schedule* out, bool* interleaved);

// Which fields a parse set explicitly, so that several sources (a layout string,
// Megatron arguments, a DeepSpeed config) can be merged and checked for conflicts.
struct LayoutFields {
  bool dp = false, tp = false, cp = false, pp = false, vpp = false, sp = false, zero = false,
       recompute = false, mbs = false, schedule = false, first_stage_layers = false,
       last_stage_layers = false, recompute_method = false, recompute_layers = false, balance = false,
       ep = false, etp = false, microbatch_group = false;
};

// Parses the canonical form; unnamed fields keep the values already in *out.
// Throws LayoutError naming the field.
void parse_layout_into(std::string_view text, Layout* out, LayoutFields* set = nullptr);
Layout parse_layout(std::string_view text);
std::string to_string(const Layout& l);

}  // namespace paraplan
