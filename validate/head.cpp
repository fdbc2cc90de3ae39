// The first stage's vocab-parallel embedding (+ learned positions, dropout)
// and the last stage's final norm, output layer and vocab-parallel
// cross-entropy (Megatron-LM), forward and backward.
#include <vector>

#include "validate/exec_state.hpp"

namespace paraplan::validate::detail {

namespace {
constexpr float kNormEps = 1e-5f;
NormKind norm_kind(const Model& m) {
  return m.normalization == Normalization::kRmsNorm ? NormKind::kRmsNorm : NormKind::kLayerNorm;
}
}  // namespace

void Exec::embedding_forward(int mb, ChunkState& st, Buffer& x0) {
  const std::int64_t sq0 = seq0(mb);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(T));
  for (std::int64_t r = 0; r < T; ++r)
    ids[std::size_t(r)] = token(sq0 + r % b, r / b);
  st.tokens = Buffer::bytes(&A, T * 4, Category::kActivations, "token ids");
  dev.upload(ids.data(), st.tokens.data(), T * 4);
  const auto* tok = st.tokens.as<std::int32_t>();
  // Each tp rank looks up its vocabulary rows; the sum over tp completes it.
  if (l.sp) {
    Buffer e = act_buf(T * h, Category::kTransient, "embedding partial sum");
    dev.embedding_forward(tok, T, W(P.word_emb), tp_rank * vrows, vrows, h, e.ref(), false);
    tp_reduce(e, &x0, Category::kActivations, "embedding output");
  } else {
    x0 = act_buf(T * h, Category::kActivations, "embedding output");
    dev.embedding_forward(tok, T, W(P.word_emb), tp_rank * vrows, vrows, h, x0.ref(), false);
    Buffer none;
    tp_reduce(x0, &none, Category::kActivations, "embedding output");
  }
  const std::int64_t pos0 = l.sp ? tp_rank * (s / l.tp) : 0;
  if (P.pos_emb >= 0) {
    const Ref pe = W(P.pos_emb);
    for (std::int64_t r = 0; r < Tl; ++r) dev.axpy(1.0f, pe.at((pos0 + r / b) * h), x0.at(r * h), h);
  }
  if (m.hidden_dropout > 0) {
    st.emb_mask = Buffer::bytes(&A, Tl * h, Category::kActivations, "embedding dropout mask");
    dropout_rows(x0.ref(), x0.ref(), st.emb_mask.as<std::uint8_t>(), Tl, float(m.hidden_dropout),
                 dropout_seed(-1, 0), pos0, sq0);
  }
}

void Exec::embedding_backward(int, ChunkState& st, Buffer& dres) {
  if (st.emb_mask)
    dev.dropout_backward(dres.ref(), st.emb_mask.as<std::uint8_t>(), dres.ref(), Tl * h,
                         float(m.hidden_dropout));
  if (P.pos_emb >= 0) {
    grads_for(P.pos_emb, P.pos_emb);
    const std::int64_t pos0 = l.sp ? tp_rank * (s / l.tp) : 0;
    const Ref g = Gr(P.pos_emb);
    for (std::int64_t r = 0; r < Tl; ++r) dev.axpy(1.0f, dres.at(r * h), g.at((pos0 + r / b) * h), h);
  }
  grads_for(P.word_emb, P.word_emb);
  const Ref df = sp_gather(dres.ref());
  dev.embedding_backward(st.tokens.as<std::int32_t>(), T, df, tp_rank * vrows, vrows, h, Gr(P.word_emb));
  dres.reset();
}

void Exec::head_forward(int mb, ChunkState& st) {
  const std::int64_t sq0 = seq0(mb);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(T));
  for (std::int64_t r = 0; r < T; ++r)
    ids[std::size_t(r)] = token(sq0 + r % b, r / b + 1);
  st.targets = Buffer::bytes(&A, T * 4, Category::kActivations, "labels");
  dev.upload(ids.data(), st.targets.data(), T * 4);
  const auto* tgt = st.targets.as<std::int32_t>();
  st.nf = act_buf(Tl * h, Category::kActivations, "output layer input");
  dev.norm_forward(norm_kind(m), st.out.ref(), W(P.final_norm_w),
                   P.final_norm_b >= 0 ? W(P.final_norm_b) : Ref(), st.nf.ref(), Tl, h, kNormEps);
  const Ref a = sp_gather(st.nf.ref());
  const std::int64_t v0 = tp_rank * vrows;
  Buffer logits = act_buf(T * vrows, Category::kTransient, "logits");
  dev.gemm(false, true, T, vrows, h, 1.0f, a, h, W(P.output_w), h, 0.0f, logits.ref(), vrows);
  // Row statistics: max | sum | target logit | loss, fp32, T each.
  Buffer stats(&A, 4 * T, DType::kFp32, Category::kTransient, "cross-entropy row statistics");
  float* row_max = stats.as<float>();
  dev.ce_row_max(logits.ref(), T, vrows, v0, m.vocab_size, row_max);
  G.tp->all_reduce(Ref(row_max), T, ReduceOp::kMax);
  st.softmax = Buffer(&A, T * vrows, DType::kFp32, Category::kActivations, "cross-entropy softmax");
  dev.ce_exp_sum(logits.ref(), row_max, tgt, T, vrows, v0, m.vocab_size, st.softmax.as<float>(),
                 row_max + T, row_max + 2 * T);
  logits.reset();
  G.tp->all_reduce(Ref(row_max + T), 2 * T, ReduceOp::kSum);
  dev.ce_finish(st.softmax.as<float>(), row_max + T, row_max + 2 * T, T, vrows, row_max + 3 * T);
  std::vector<float> loss(static_cast<std::size_t>(T));
  dev.to_host(Ref(row_max + 3 * T), loss.data(), T);
  for (float x : loss) loss_sum += x;
}

Buffer Exec::head_backward(int, ChunkState& st) {
  const std::int64_t v0 = tp_rank * vrows;
  dev.ce_backward(st.softmax.as<float>(), st.targets.as<std::int32_t>(), T, vrows, v0,
                  float(1.0 / (double(t.global_batch_size) * double(s))));
  const Ref a = sp_gather(st.nf.ref());
  grads_for(P.output_w, P.output_w);
  const Ref dlogits(st.softmax.as<float>());
  dev.gemm(true, false, vrows, h, T, 1.0f, dlogits, vrows, a, h, 1.0f, Gr(P.output_w), h);
  Buffer dn = act_buf(T * h, Category::kTransient, "output layer input gradient");
  dev.gemm(false, false, T, h, vrows, 1.0f, dlogits, vrows, W(P.output_w), h, 0.0f, dn.ref(), h);
  st.softmax.reset();
  Buffer dnl;
  tp_reduce(dn, &dnl, Category::kTransient, "output layer input gradient shard");
  Buffer dres = act_buf(Tl * h, Category::kTransient, "output gradient");
  grads_for(P.final_norm_w, P.final_norm_b);
  dev.norm_backward(norm_kind(m), st.out.ref(), W(P.final_norm_w), (l.sp ? dnl : dn).ref(), dres.ref(), false,
                    Gr(P.final_norm_w), Gr(P.final_norm_b), Tl, h, kNormEps);
  st.nf.reset(), st.out.reset(), st.targets.reset();
  return dres;
}

}  // namespace paraplan::validate::detail
