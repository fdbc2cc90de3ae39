// One transformer block, forward and backward, on one tp rank (Shoeybi et al.
// 2019: QKV and fc1 column-parallel, out-proj and fc2 row-parallel; Korthikanti
// et al. 2022: sequence parallelism in the norm/dropout regions). Every tensor
// is a tracked Buffer; the categories say what the memory model calls them.
#include <fmt/format.h>

#include <cmath>

#include "validate/exec_state.hpp"

namespace paraplan::validate::detail {

namespace {
constexpr float kNormEps = 1e-5f;
constexpr float kRopeTheta = 10000.0f;
NormKind norm_kind(const Model& m) {
  return m.normalization == Normalization::kRmsNorm ? NormKind::kRmsNorm : NormKind::kLayerNorm;
}
ActKind act_kind(const Model& m) {
  return m.activation == Activation::kSwiglu ? ActKind::kSwiglu : ActKind::kGelu;
}
}  // namespace

std::uint64_t Exec::dropout_seed(int layer, int which) const {
  return hash_mix(cfg.seed + 0x51ed27ull * std::uint64_t(step_no + 1), layer, which);
}

std::int64_t Exec::seq0(int mb) const {
  const std::int64_t per_dp = t.global_batch_size / l.dp;
  return std::int64_t(step_no) * t.global_batch_size + dp_rank * per_dp + std::int64_t(mb) * b;
}

void Exec::dropout_rows(CRef x, Ref y, std::uint8_t* mask, std::int64_t rows_local, float p,
                        std::uint64_t seed, std::int64_t pos0, std::int64_t sq0) {
  // Token rows are [s, b]: the b rows of one position have consecutive keys.
  for (std::int64_t i = 0; i < rows_local / b; ++i) {
    const DropoutKey key{seed, (pos0 + i) * (std::int64_t(1) << 32) + sq0, 0};
    dev.dropout_forward(x.at(i * b * h), y.at(i * b * h), mask + i * b * h, b, h, p, key);
  }
}

Ref Exec::sp_gather(CRef local) {
  if (!l.sp) return local;
  G.tp->all_gather(local, sp_buf.ref(), Tl * h);
  return sp_buf.ref();
}

void Exec::tp_reduce(Buffer& partial, Buffer* shard_out, Category cat, const char* what) {
  if (l.sp) {
    *shard_out = act_buf(Tl * h, cat, what);
    G.tp->reduce_scatter(partial.ref(), shard_out->ref(), Tl * h);
    partial.reset();
  } else if (l.tp > 1) {
    G.tp->all_reduce(partial.ref(), T * h, ReduceOp::kSum);
  }
}

void Exec::attention_core(int li, int mb, LayerSaved& S, Category cat, bool want_ctx) {
  const std::int64_t hq = m.num_attention_heads / l.tp, hkv = m.num_kv_heads / l.tp;
  const std::int64_t nqkv = ql + 2 * kvl;
  const AttnShape a{s, b, hq, hkv, m.head_dim, nqkv, 0, ql, ql + kvl, float(1.0 / std::sqrt(double(m.head_dim)))};
  if (t.flash_attention) {
    S.ctx = act_buf(T * ql, cat, "attention output");
    S.lse = Buffer(&A, b * hq * s, DType::kFp32, cat, "log-sum-exp");
    Buffer scratch(&A, s, DType::kFp32, Category::kTransient, "attention scratch");
    dev.flash_attention_forward(S.qkv.ref(), a, S.ctx.ref(), S.lse.as<float>(), scratch.as<float>());
    return;
  }
  // Selective recomputation re-creates exactly these (Korthikanti et al. §5.1).
  const Category core = l.recompute == Recompute::kSelective ? Category::kTransient : cat;
  S.probs = act_buf(b * hq * s * s, core, "attention softmax");
  dev.attention_probs(S.qkv.ref(), a, S.probs.ref());
  Ref pv = S.probs.ref();
  const float p = float(m.attention_dropout);
  if (p > 0) {
    S.amask = Buffer::bytes(&A, b * hq * s * s, core, "attention dropout mask");
    S.dropped = act_buf(b * hq * s * s, core, "attention dropout output");
    dev.attention_dropout_forward(S.probs.ref(), S.dropped.ref(), S.amask.as<std::uint8_t>(), a, p,
                                  dropout_seed(P.layer_global[li], 2), seq0(mb),
                                  tp_rank * hq, m.num_attention_heads);
    pv = S.dropped.ref();
  }
  if (want_ctx) {
    S.ctx = act_buf(T * ql, cat, "attention output");
    dev.attention_pv(pv, S.qkv.ref(), a, S.ctx.ref());
  }
}

void Exec::layer_forward(int li, int mb, LayerSaved& S, Ref out, Category cat, bool recompute) {
  const LayerParams& L = P.layers[li];
  const int gl = P.layer_global[li];
  const std::int64_t nqkv = ql + 2 * kvl;
  const std::int64_t pos0 = l.sp ? tp_rank * (s / l.tp) : 0;
  const float p = float(m.hidden_dropout);
  // ---- attention block ----
  S.n1 = act_buf(Tl * h, cat, "attention norm output");
  dev.norm_forward(norm_kind(m), S.x.ref(), W(L.attn_norm_w), L.attn_norm_b >= 0 ? W(L.attn_norm_b) : Ref(),
                   S.n1.ref(), Tl, h, kNormEps);
  Ref a1 = sp_gather(S.n1.ref());
  S.qkv = act_buf(T * nqkv, cat, "QKV");
  dev.gemm(false, true, T, nqkv, h, 1.0f, a1, h, W(L.qkv_w), h, 0.0f, S.qkv.ref(), nqkv);
  if (L.qkv_b >= 0) dev.add_bias(S.qkv.ref(), W(L.qkv_b), T, nqkv);
  if (m.position_embedding == PositionEmbedding::kRope) {
    const std::int64_t hq = m.num_attention_heads / l.tp, hkv = m.num_kv_heads / l.tp;
    dev.rope(S.qkv.ref(), nqkv, 0, hq, m.head_dim, s, b, kRopeTheta, false);
    dev.rope(S.qkv.ref(), nqkv, ql, hkv, m.head_dim, s, b, kRopeTheta, false);
  }
  attention_core(li, mb, S, cat, true);
  if (l.recompute == Recompute::kSelective && !recompute) S.probs.reset(), S.amask.reset(), S.dropped.reset();
  Buffer y = act_buf(T * h, Category::kTransient, "attention projection partial sum");
  dev.gemm(false, true, T, h, ql, 1.0f, S.ctx.ref(), ql, W(L.out_w), ql, 0.0f, y.ref(), h);
  Buffer yl;
  tp_reduce(y, &yl, Category::kTransient, "attention projection output");
  Buffer& yr = l.sp ? yl : y;
  if (L.out_b >= 0) dev.add_bias(yr.ref(), W(L.out_b), Tl, h);
  if (p > 0) {
    S.mask1 = Buffer::bytes(&A, Tl * h, cat, "attention residual dropout mask");
    dropout_rows(yr.ref(), yr.ref(), S.mask1.as<std::uint8_t>(), Tl, p, dropout_seed(gl, 0), pos0, seq0(mb));
  }
  S.x1 = act_buf(Tl * h, cat, "attention residual output");
  dev.add(S.x.ref(), yr.ref(), S.x1.ref(), Tl * h);
  yr.reset();
  // ---- MLP block ----
  S.n2 = act_buf(Tl * h, cat, "MLP norm output");
  dev.norm_forward(norm_kind(m), S.x1.ref(), W(L.mlp_norm_w), L.mlp_norm_b >= 0 ? W(L.mlp_norm_b) : Ref(),
                   S.n2.ref(), Tl, h, kNormEps);
  Ref a2 = sp_gather(S.n2.ref());
  S.u = act_buf(T * finl, cat, "fc1 output");
  dev.gemm(false, true, T, finl, h, 1.0f, a2, h, W(L.fc1_w), h, 0.0f, S.u.ref(), finl);
  if (L.fc1_b >= 0) dev.add_bias(S.u.ref(), W(L.fc1_b), T, finl);
  S.g = act_buf(T * fl, cat, "activation output");
  dev.act_forward(act_kind(m), S.u.ref(), S.g.ref(), T, fl);
  Buffer z = act_buf(T * h, Category::kTransient, "fc2 partial sum");
  dev.gemm(false, true, T, h, fl, 1.0f, S.g.ref(), fl, W(L.fc2_w), fl, 0.0f, z.ref(), h);
  Buffer zl;
  tp_reduce(z, &zl, Category::kTransient, "fc2 output");
  Buffer& zr = l.sp ? zl : z;
  if (L.fc2_b >= 0) dev.add_bias(zr.ref(), W(L.fc2_b), Tl, h);
  if (p > 0) {
    S.mask2 = Buffer::bytes(&A, Tl * h, cat, "MLP residual dropout mask");
    dropout_rows(zr.ref(), zr.ref(), S.mask2.as<std::uint8_t>(), Tl, p, dropout_seed(gl, 1), pos0, seq0(mb));
  }
  if (out) dev.add(S.x1.ref(), zr.ref(), out, Tl * h);
}

void Exec::layer_backward(int li, int mb, LayerSaved& S, Buffer& dres) {
  const LayerParams& L = P.layers[li];
  const std::int64_t nqkv = ql + 2 * kvl;
  const float p = float(m.hidden_dropout);
  if (S.checkpointed) layer_forward(li, mb, S, Ref(), Category::kTransient, true);
  // ---- MLP block ----
  Buffer dz;
  if (S.mask2) {
    dz = act_buf(Tl * h, Category::kTransient, "MLP output gradient");
    dev.dropout_backward(dres.ref(), S.mask2.as<std::uint8_t>(), dz.ref(), Tl * h, p);
  }
  const Ref dzr = S.mask2 ? dz.ref() : dres.ref();
  grads_for(L.fc2_w, L.fc2_b);
  if (L.fc2_b >= 0) dev.bias_backward(dzr, Gr(L.fc2_b), Tl, h);
  const Ref dzf = sp_gather(dzr);
  Buffer dg = act_buf(T * fl, Category::kTransient, "activation output gradient");
  dev.gemm(false, false, T, fl, h, 1.0f, dzf, h, W(L.fc2_w), fl, 0.0f, dg.ref(), fl);
  dev.gemm(true, false, h, fl, T, 1.0f, dzf, h, S.g.ref(), fl, 1.0f, Gr(L.fc2_w), fl);
  dz.reset();
  Buffer du = act_buf(T * finl, Category::kTransient, "fc1 output gradient");
  dev.act_backward(act_kind(m), S.u.ref(), dg.ref(), du.ref(), T, fl);
  dg.reset();
  grads_for(L.fc1_w, L.fc1_b);
  if (L.fc1_b >= 0) dev.bias_backward(du.ref(), Gr(L.fc1_b), T, finl);
  const Ref a2 = sp_gather(S.n2.ref());
  dev.gemm(true, false, finl, h, T, 1.0f, du.ref(), finl, a2, h, 1.0f, Gr(L.fc1_w), h);
  Buffer dn = act_buf(T * h, Category::kTransient, "MLP norm output gradient");
  dev.gemm(false, false, T, h, finl, 1.0f, du.ref(), finl, W(L.fc1_w), h, 0.0f, dn.ref(), h);
  du.reset();
  Buffer dnl;
  tp_reduce(dn, &dnl, Category::kTransient, "MLP norm output gradient shard");
  grads_for(L.mlp_norm_w, L.mlp_norm_b);
  dev.norm_backward(norm_kind(m), S.x1.ref(), W(L.mlp_norm_w), (l.sp ? dnl : dn).ref(), dres.ref(), true,
                    Gr(L.mlp_norm_w), Gr(L.mlp_norm_b), Tl, h, kNormEps);
  dn.reset(), dnl.reset();
  // ---- attention block ----
  Buffer dy;
  if (S.mask1) {
    dy = act_buf(Tl * h, Category::kTransient, "attention output gradient");
    dev.dropout_backward(dres.ref(), S.mask1.as<std::uint8_t>(), dy.ref(), Tl * h, p);
  }
  const Ref dyr = S.mask1 ? dy.ref() : dres.ref();
  grads_for(L.out_w, L.out_b);
  if (L.out_b >= 0) dev.bias_backward(dyr, Gr(L.out_b), Tl, h);
  const Ref dyf = sp_gather(dyr);
  Buffer dctx = act_buf(T * ql, Category::kTransient, "attention context gradient");
  dev.gemm(false, false, T, ql, h, 1.0f, dyf, h, W(L.out_w), ql, 0.0f, dctx.ref(), ql);
  dev.gemm(true, false, h, ql, T, 1.0f, dyf, h, S.ctx.ref(), ql, 1.0f, Gr(L.out_w), ql);
  dy.reset();
  if (l.recompute == Recompute::kSelective && !t.flash_attention)
    attention_core(li, mb, S, Category::kTransient, false);
  Buffer dqkv = act_buf(T * nqkv, Category::kTransient, "QKV gradient");
  {
    const std::int64_t hq = m.num_attention_heads / l.tp, hkv = m.num_kv_heads / l.tp;
    const AttnShape a{s, b, hq, hkv, m.head_dim, nqkv, 0, ql, ql + kvl, float(1.0 / std::sqrt(double(m.head_dim)))};
    Buffer scratch(&A, 2 * s, DType::kFp32, Category::kTransient, "attention scratch");
    if (t.flash_attention)
      dev.flash_attention_backward(S.qkv.ref(), S.ctx.ref(), S.lse.as<float>(), dctx.ref(), a, dqkv.ref(),
                                   scratch.as<float>());
    else
      dev.attention_backward(S.qkv.ref(), S.probs.ref(), S.amask.as<std::uint8_t>(), S.dropped.ref(),
                             float(m.attention_dropout), dctx.ref(), a, dqkv.ref(), scratch.as<float>());
    if (m.position_embedding == PositionEmbedding::kRope) {
      dev.rope(dqkv.ref(), nqkv, 0, hq, m.head_dim, s, b, kRopeTheta, true);
      dev.rope(dqkv.ref(), nqkv, ql, hkv, m.head_dim, s, b, kRopeTheta, true);
    }
  }
  dctx.reset();
  if (l.recompute == Recompute::kSelective) S.probs.reset(), S.amask.reset(), S.dropped.reset();
  grads_for(L.qkv_w, L.qkv_b);
  if (L.qkv_b >= 0) dev.bias_backward(dqkv.ref(), Gr(L.qkv_b), T, nqkv);
  const Ref a1 = sp_gather(S.n1.ref());
  dev.gemm(true, false, nqkv, h, T, 1.0f, dqkv.ref(), nqkv, a1, h, 1.0f, Gr(L.qkv_w), h);
  Buffer dn1 = act_buf(T * h, Category::kTransient, "attention norm output gradient");
  dev.gemm(false, false, T, h, nqkv, 1.0f, dqkv.ref(), nqkv, W(L.qkv_w), h, 0.0f, dn1.ref(), h);
  dqkv.reset();
  Buffer dn1l;
  tp_reduce(dn1, &dn1l, Category::kTransient, "attention norm output gradient shard");
  grads_for(L.attn_norm_w, L.attn_norm_b);
  dev.norm_backward(norm_kind(m), S.x.ref(), W(L.attn_norm_w), (l.sp ? dn1l : dn1).ref(), dres.ref(), true,
                    Gr(L.attn_norm_w), Gr(L.attn_norm_b), Tl, h, kNormEps);
}

}  // namespace paraplan::validate::detail
