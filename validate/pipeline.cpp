// The pipeline schedule of one rank and the forward/backward of one model
// chunk for one micro-batch, with real sends and receives between stages.
#include <fmt/format.h>

#include <algorithm>

#include "validate/exec_state.hpp"
#include "validate/pipeline.hpp"

namespace paraplan::validate {

std::vector<PipelineAction> pipeline_actions(const Layout& l, int stage, int M) {
  std::vector<PipelineAction> out;
  const int p = l.pp, v = l.vpp;
  if (l.schedule == Schedule::kGPipe) {
    // GPipe (Huang et al. 2019): every forward, then every backward.
    for (int c = 0; c < v; ++c)
      for (int mb = 0; mb < M; ++mb) out.push_back({true, c, mb});
    for (int c = v - 1; c >= 0; --c)
      for (int mb = 0; mb < M; ++mb) out.push_back({false, c, mb});
    return out;
  }
  const int total = M * v;
  // 1F1B warm-up: p - i - 1 forwards (PipeDream-Flush); interleaved:
  // 2(p - i - 1) + (v - 1)p chunk forwards (Megatron-LM schedules.py).
  const int warm = std::min(v == 1 ? p - stage - 1 : 2 * (p - stage - 1) + (v - 1) * p, total);
  // k-th forward / backward: groups of p micro-batches per chunk.
  auto mb_of = [&](int k) { return v == 1 ? k : (k / (p * v)) * p + k % p; };
  auto fchunk = [&](int k) { return v == 1 ? 0 : (k / p) % v; };
  auto bchunk = [&](int k) { return v == 1 ? 0 : v - 1 - (k / p) % v; };
  for (int k = 0; k < warm; ++k) out.push_back({true, fchunk(k), mb_of(k)});
  for (int i = 0; i < total - warm; ++i) {
    out.push_back({true, fchunk(warm + i), mb_of(warm + i)});
    out.push_back({false, bchunk(i), mb_of(i)});
  }
  for (int k = total - warm; k < total; ++k) out.push_back({false, bchunk(k), mb_of(k)});
  return out;
}

namespace detail {

namespace {
// Message tags: activations into virtual stage vs, micro-batch mb, and the
// gradients flowing back out of it.
int fwd_tag(int vs, int mb, int M) { return (vs * M + mb) * 2; }
int bwd_tag(int vs, int mb, int M) { return (vs * M + mb) * 2 + 1; }
}  // namespace

void Exec::phase(const char* what, int chunk, int mb, int layer) {
  std::string p = layer >= 0 ? fmt::format("step {} {} chunk {} mb {} layer {}", step_no, what, chunk, mb, layer)
                             : fmt::format("step {} {} chunk {} mb {}", step_no, what, chunk, mb);
  A.set_phase(std::move(p));
}

void Exec::run_schedule() {
  for (const PipelineAction& a : pipeline_actions(l, stage, M)) {
    if (cfg.progress)
      cfg.progress(fmt::format("step {} {} chunk {} mb {}", step_no, a.forward ? "F" : "B", a.chunk, a.mb));
    if (a.forward) forward(a.chunk, a.mb);
    else backward(a.chunk, a.mb);
  }
}

void Exec::forward(int c, int mb) {
  ScopedPhase timed(&timer, "forward");  // its collectives nest inside: compute is its self time
  const int vs = c * l.pp + stage, last_vs = l.pp * l.vpp - 1;
  const int next = (stage + 1) % l.pp, prev = (stage + l.pp - 1) % l.pp;
  phase("F", c, mb);
  ChunkState& st = states[std::size_t(c) * M + mb];
  const int per_chunk = chunk_len[std::size_t(c)];
  st.layers.resize(std::size_t(per_chunk));
  Buffer x;
  if (vs == 0) {
    embedding_forward(mb, st, x);
  } else {
    x = act_buf(Tl * h, Category::kActivations, "received layer input");
    G.pp->recv(x.ref(), Tl * h, prev, fwd_tag(vs, mb, M));
  }
  // Full recompute checkpoints every layer (uniform, 1 per group) or the
  // first recompute_layers of the chunk (block; Megatron recompute.py:167-180).
  const int checkpointed = recomputed_layers(l, per_chunk);
  for (int i = 0; i < per_chunk; ++i) {
    const int li = chunk_first[std::size_t(c)] + i;
    LayerSaved& S = st.layers[std::size_t(i)];
    S.x = std::move(x);
    Ref target;
    if (i < per_chunk - 1) {
      phase("F", c, mb, P.layer_global[li]);
      x = act_buf(Tl * h, Category::kActivations, "layer output");
      target = x.ref();
    } else if (vs != last_vs) {
      if (send_req[0]) {
        ScopedPhase wait(&timer, "pp send_wait");
        send_req[0]->wait();
        send_req[0].reset();
      }
      target = send_slot[0].ref();
    } else {
      phase("F", c, mb, P.layer_global[li]);
      st.out = act_buf(Tl * h, Category::kActivations, "final norm input");
      target = st.out.ref();
    }
    phase("F", c, mb, P.layer_global[li]);
    const bool recompute_full = i < checkpointed;
    layer_forward(li, mb, S, target, recompute_full ? Category::kTransient : Category::kActivations,
                  false);
    if (recompute_full) {
      // Full recomputation keeps only the layer input (Chen et al. 2016).
      Buffer keep = std::move(S.x);
      S = LayerSaved{};
      S.x = std::move(keep);
      S.checkpointed = true;
    }
  }
  if (vs != last_vs) {
    send_req[0] = G.pp->isend(send_slot[0].ref(), Tl * h, next, fwd_tag(vs + 1, mb, M));
  } else {
    head_forward(mb, st);
  }
}

void Exec::backward(int c, int mb) {
  ScopedPhase timed(&timer, "backward");
  const int vs = c * l.pp + stage, last_vs = l.pp * l.vpp - 1;
  const int next = (stage + 1) % l.pp, prev = (stage + l.pp - 1) % l.pp;
  phase("B", c, mb);
  ChunkState& st = states[std::size_t(c) * M + mb];
  Buffer dres;
  if (vs == last_vs) {
    dres = head_backward(mb, st);
  } else {
    dres = act_buf(Tl * h, Category::kTransient, "output gradient");
    G.pp->recv(dres.ref(), Tl * h, next, bwd_tag(vs, mb, M));
  }
  for (int i = chunk_len[std::size_t(c)] - 1; i >= 0; --i) {
    const int li = chunk_first[std::size_t(c)] + i;
    phase("B", c, mb, P.layer_global[li]);
    layer_backward(li, mb, st.layers[std::size_t(i)], dres);
    st.layers[std::size_t(i)] = LayerSaved{};
  }
  phase("B", c, mb);
  if (vs > 0) {
    if (send_req[1]) {
      ScopedPhase wait(&timer, "pp send_wait");
      send_req[1]->wait();
      send_req[1].reset();
    }
    dev.copy(dres.ref(), send_slot[1].ref(), Tl * h);
    dres.reset();
    send_req[1] = G.pp->isend(send_slot[1].ref(), Tl * h, prev, bwd_tag(vs - 1, mb, M));
  } else {
    embedding_backward(mb, st, dres);
  }
  st = ChunkState{};
}

}  // namespace detail
}  // namespace paraplan::validate
