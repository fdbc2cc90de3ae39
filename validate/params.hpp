// The parameters one rank holds: every tensor of its pipeline stage (all model
// chunks), tp-sharded, laid out in one flat vector so that ZeRO can shard it
// by contiguous ranges. Each tensor knows how its local elements map to the
// global (unsharded) tensor, so initialisation and gradient checks agree
// between a sharded run and a single-rank run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/spec.hpp"

namespace paraplan::validate {

enum class Init { kNormal, kOne, kZero };

// Rows [local_row0, local_row0 + rows) of the local tensor are global rows
// [global_row0, ...). Column-parallel layers are several segments (fused Q|K|V,
// SwiGLU gate|up); row-parallel ones one segment with a column offset.
struct Segment {
  std::int64_t local_row0, rows, global_row0;
};

struct ParamDesc {
  std::string name;          // global name, e.g. "layers.3.fc1.weight"
  std::int64_t offset = 0;   // in the stage's flat vector
  std::int64_t rows = 0, cols = 0;  // local shape (a vector is rows x 1)
  std::int64_t global_rows = 0, global_cols = 0;
  std::int64_t col0 = 0;     // global column of local column 0
  std::vector<Segment> segments;
  std::int64_t valid_global_rows = 0;  // rows beyond are padding (vocab), kept 0
  Init init = Init::kNormal;
  double std = 0.02;
  bool tp_replicated = false;  // same full tensor on every tp rank (norms, row-parallel biases)
  std::int64_t numel() const { return rows * cols; }
  // Global flat index of local element (r, c), or -1 for padding.
  std::int64_t global_index(std::int64_t r, std::int64_t c) const;
};

// Indices into ParamLayout::params for one transformer layer.
struct LayerParams {
  int attn_norm_w = -1, attn_norm_b = -1, qkv_w = -1, qkv_b = -1, out_w = -1, out_b = -1;
  int mlp_norm_w = -1, mlp_norm_b = -1, fc1_w = -1, fc1_b = -1, fc2_w = -1, fc2_b = -1;
};

// A ZeRO-3 gather unit: a contiguous range of the flat vector used together.
struct Unit {
  std::string name;
  std::int64_t begin = 0, end = 0;
};

struct ParamLayout {
  std::vector<ParamDesc> params;
  std::vector<LayerParams> layers;  // local layers in execution order (chunk-major)
  std::vector<int> layer_global;    // global layer index of each local layer
  std::vector<int> layer_unit;      // unit index of each local layer
  int word_emb = -1, pos_emb = -1, final_norm_w = -1, final_norm_b = -1, output_w = -1;
  int embedding_unit = -1, final_norm_unit = -1, output_unit = -1;
  std::vector<Unit> units;
  std::int64_t total = 0;  // elements of the flat vector
  std::int64_t vocab_rows = 0;  // ceil(V / tp)
  std::int64_t largest_param = 0, largest_unit = 0;
};

// The parameters of pipeline rank `stage`, tp rank `tp_rank`. Local layers are
// the chunks of this stage in order: chunk c holds global layers
// [(c * pp + stage) * L/(pp*vpp), ...) (Megatron-LM's interleaved assignment).
ParamLayout make_param_layout(const Model& m, const Layout& l, int stage, int tp_rank);

// ZeRO shards of a flat vector of n elements over dp ranks: ceil(n/dp) each,
// the last ones shorter (possibly empty).
struct Shards {
  std::vector<std::int64_t> counts, displs;
};
Shards make_shards(std::int64_t n, int dp);

// Initial value of a parameter element (deterministic in the global index).
float init_value(const ParamDesc& p, std::int64_t r, std::int64_t c, std::uint64_t seed);

}  // namespace paraplan::validate
