#include "validate/params.hpp"

#include <algorithm>
#include <cmath>

#include "validate/device.hpp"

namespace paraplan::validate {

std::int64_t ParamDesc::global_index(std::int64_t r, std::int64_t c) const {
  for (const Segment& s : segments)
    if (r >= s.local_row0 && r < s.local_row0 + s.rows) {
      const std::int64_t gr = s.global_row0 + (r - s.local_row0);
      if (gr >= valid_global_rows) return -1;
      return gr * global_cols + col0 + c;
    }
  return -1;
}

float init_value(const ParamDesc& p, std::int64_t r, std::int64_t c, std::uint64_t seed) {
  if (p.init == Init::kOne) return 1.0f;
  if (p.init == Init::kZero) return 0.0f;
  const std::int64_t g = p.global_index(r, c);
  if (g < 0) return 0.0f;
  std::uint64_t name_hash = 1469598103934665603ull;  // FNV-1a of the global name
  for (char ch : p.name) name_hash = (name_hash ^ std::uint8_t(ch)) * 1099511628211ull;
  // Uniform with the normal's standard deviation: sqrt(3) * std * (2u - 1).
  const double u = hash_uniform(seed ^ name_hash, 0, g);
  return float(std::sqrt(3.0) * p.std * (2.0 * u - 1.0));
}

Shards make_shards(std::int64_t n, int dp) {
  Shards s;
  const std::int64_t per = (n + dp - 1) / dp;
  for (int i = 0; i < dp; ++i) {
    const std::int64_t lo = std::min(n, i * per), hi = std::min(n, lo + per);
    s.displs.push_back(lo);
    s.counts.push_back(hi - lo);
  }
  return s;
}

namespace {

struct Builder {
  ParamLayout out;
  int add(std::string name, std::int64_t rows, std::int64_t cols, std::int64_t grows,
          std::int64_t gcols, Init init, double stdev, bool replicated) {
    ParamDesc p;
    p.name = std::move(name);
    p.offset = out.total;
    p.rows = rows, p.cols = cols, p.global_rows = grows, p.global_cols = gcols;
    p.valid_global_rows = grows;
    p.init = init, p.std = stdev, p.tp_replicated = replicated;
    p.segments.push_back({0, rows, 0});
    out.total += rows * cols;
    out.largest_param = std::max(out.largest_param, rows * cols);
    out.params.push_back(std::move(p));
    return int(out.params.size()) - 1;
  }
  // Replicated vector (norm weight/bias, row-parallel bias).
  int vec(const std::string& name, std::int64_t n, Init init) {
    return add(name, n, 1, n, 1, init, 0, true);
  }
  void begin_unit(std::string name) { out.units.push_back(Unit{std::move(name), out.total, 0}); }
  int end_unit() {
    Unit& u = out.units.back();
    u.end = out.total;
    out.largest_unit = std::max(out.largest_unit, u.end - u.begin);
    return int(out.units.size()) - 1;
  }
};

}  // namespace

ParamLayout make_param_layout(const Model& m, const Layout& l, int stage, int tp_rank) {
  Builder b;
  const std::int64_t h = m.hidden_size, t = l.tp, q = m.q_width(), kv = m.kv_width();
  const std::int64_t f = m.ffn_hidden_size, fin = m.ffn_in_width();
  const bool ln = m.normalization == Normalization::kLayerNorm;
  const std::int64_t vrows = (m.vocab_size + t - 1) / t;
  b.out.vocab_rows = vrows;
  const double std = 0.02, out_std = 0.02 / std::sqrt(2.0 * m.num_layers);  // GPT-2 scaled init
  const bool first = stage == 0, last = stage == l.pp - 1;

  if (first) {
    b.begin_unit("embedding");
    b.out.word_emb = b.add("embedding.word", vrows, h, vrows * t, h, Init::kNormal, std, false);
    ParamDesc& w = b.out.params[b.out.word_emb];
    w.segments = {{0, vrows, tp_rank * vrows}};
    w.valid_global_rows = m.vocab_size;
    if (m.position_embedding == PositionEmbedding::kLearned)
      b.out.pos_emb = b.add("embedding.position", m.max_position_embeddings, h,
                            m.max_position_embeddings, h, Init::kNormal, std, true);
    b.out.embedding_unit = b.end_unit();
  }

  StageSplit split;
  stage_split(m.num_layers, l, &split);
  for (int c = 0; c < l.vpp; ++c) {
    const int vs = c * l.pp + stage, first_layer = virtual_stage_first_layer(split, l, vs);
    for (int i = 0; i < virtual_stage_layers(split, l, vs); ++i) {
      const int g = first_layer + i;
      const std::string p = "layers." + std::to_string(g) + ".";
      b.begin_unit("layer " + std::to_string(g));
      LayerParams lp;
      lp.attn_norm_w = b.vec(p + "attn_norm.weight", h, Init::kOne);
      if (ln) lp.attn_norm_b = b.vec(p + "attn_norm.bias", h, Init::kZero);
      // Column-parallel QKV: this rank's Q heads, then its K and V heads.
      const std::int64_t ql = q / t, kvl = kv / t;
      lp.qkv_w = b.add(p + "qkv.weight", ql + 2 * kvl, h, q + 2 * kv, h, Init::kNormal, std, false);
      b.out.params[lp.qkv_w].segments = {{0, ql, tp_rank * ql},
                                         {ql, kvl, q + tp_rank * kvl},
                                         {ql + kvl, kvl, q + kv + tp_rank * kvl}};
      if (m.has_qkv_bias()) {
        lp.qkv_b = b.add(p + "qkv.bias", ql + 2 * kvl, 1, q + 2 * kv, 1, Init::kZero, 0, false);
        b.out.params[lp.qkv_b].segments = b.out.params[lp.qkv_w].segments;
      }
      // Row-parallel out-projection: all rows, this rank's columns.
      lp.out_w = b.add(p + "out_proj.weight", h, ql, h, q, Init::kNormal, out_std, false);
      b.out.params[lp.out_w].col0 = tp_rank * ql;
      if (m.bias) lp.out_b = b.vec(p + "out_proj.bias", h, Init::kZero);
      lp.mlp_norm_w = b.vec(p + "mlp_norm.weight", h, Init::kOne);
      if (ln) lp.mlp_norm_b = b.vec(p + "mlp_norm.bias", h, Init::kZero);
      const std::int64_t fl = f / t, finl = fin / t;
      lp.fc1_w = b.add(p + "fc1.weight", finl, h, fin, h, Init::kNormal, std, false);
      if (m.activation == Activation::kSwiglu)
        b.out.params[lp.fc1_w].segments = {{0, fl, tp_rank * fl}, {fl, fl, f + tp_rank * fl}};
      else
        b.out.params[lp.fc1_w].segments = {{0, finl, tp_rank * finl}};
      if (m.bias) {
        lp.fc1_b = b.add(p + "fc1.bias", finl, 1, fin, 1, Init::kZero, 0, false);
        b.out.params[lp.fc1_b].segments = b.out.params[lp.fc1_w].segments;
      }
      lp.fc2_w = b.add(p + "fc2.weight", h, fl, h, f, Init::kNormal, out_std, false);
      b.out.params[lp.fc2_w].col0 = tp_rank * fl;
      if (m.bias) lp.fc2_b = b.vec(p + "fc2.bias", h, Init::kZero);
      b.out.layers.push_back(lp);
      b.out.layer_global.push_back(g);
      b.out.layer_unit.push_back(b.end_unit());
    }
  }

  if (last) {
    b.begin_unit("final norm");
    b.out.final_norm_w = b.vec("final_norm.weight", h, Init::kOne);
    if (ln) b.out.final_norm_b = b.vec("final_norm.bias", h, Init::kZero);
    b.out.final_norm_unit = b.end_unit();
    // Untied: own output matrix. Tied with pp > 1: a copy of the word
    // embedding (same name, same initial values), kept in sync by an
    // all-reduce of its gradient with the first stage (Megatron-LM).
    if (!m.tie_embeddings || l.pp > 1) {
      b.begin_unit("output");
      const char* name = m.tie_embeddings ? "embedding.word" : "output.weight";
      b.out.output_w = b.add(name, vrows, h, vrows * t, h, Init::kNormal, std, false);
      ParamDesc& o = b.out.params[b.out.output_w];
      o.segments = {{0, vrows, tp_rank * vrows}};
      o.valid_global_rows = m.vocab_size;
      b.out.output_unit = b.end_unit();
    } else {
      b.out.output_w = b.out.word_emb;
    }
  }
  return std::move(b.out);
}

}  // namespace paraplan::validate
