// Set-up, parameter/gradient storage under ZeRO 0-3, the optimizer step and
// the step loop. The model pieces are in layer.cpp and head.cpp, the pipeline
// schedule in pipeline.cpp.
#include "validate/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <thread>
#include <vector>

#include "validate/exec_state.hpp"

namespace paraplan::validate {

std::int32_t synthetic_token(std::uint64_t seed, std::int64_t seq, std::int64_t pos,
                             std::int64_t vocab) {
  const std::int64_t start = std::int64_t(hash_mix(seed, seq, -1) % std::uint64_t(vocab));
  const std::int64_t stride = 1 + std::int64_t(hash_mix(seed, seq, -2) % 3);
  return std::int32_t((start + stride * pos) % vocab);
}

namespace detail {

std::int32_t Exec::token(std::int64_t seq, std::int64_t pos) const {
  const std::int32_t t = synthetic_token(cfg.seed, seq, pos, m.vocab_size);
  if (!cfg.emulated || l.tp == 1) return t;
  const std::int64_t first = tp_rank * vrows, rows = std::min<std::int64_t>(vrows, m.vocab_size - first);
  return rows > 0 ? std::int32_t(first + t % rows) : t;
}

Exec::Exec(const RunConfig& c, Device& d, TrackingAllocator& a, Groups& g)
    : cfg(c), dev(d), A(a), clock(d.phase_clock()), timer(clock.get()), G(timed_views(g, &timer)),
      m(c.spec.model), l(c.layout), t(c.spec.training) {
  const RankCoords rc = coords_of(c.rank, l.tp, l.dp);
  stage = rc.stage, tp_rank = rc.tp_rank, dp_rank = rc.dp_rank;
  M = num_microbatches(c.spec, l);
  {
    StageSplit split;
    stage_split(m.num_layers, l, &split);
    int at = 0;
    for (int c = 0; c < l.vpp; ++c) {
      const int n = virtual_stage_layers(split, l, c * l.pp + stage);
      if (n < 1)
        throw std::invalid_argument("the validator runs model chunks of at least one layer; chunk " + std::to_string(c) +
                                    " of stage " + std::to_string(stage) + " has none");
      chunk_first.push_back(at);
      chunk_len.push_back(n);
      at += n;
    }
  }
  s = t.seq_length, b = l.mbs, T = s * b, h = m.hidden_size;
  Tl = l.sp ? T / l.tp : T;
  ql = m.q_width() / l.tp, kvl = m.kv_width() / l.tp;
  fl = m.ffn_hidden_size / l.tp, finl = m.ffn_in_width() / l.tp;
  act = wdt = t.precision;
  gdt = t.grad_dtype;
  if (act == DType::kFp16 || gdt == DType::kFp16)
    throw std::invalid_argument("the validator runs fp32 and bf16 (mixed) precision; fp16 is not supported");
  P = make_param_layout(m, l, stage, tp_rank);
  vrows = P.vocab_rows;
  param_unit.assign(P.params.size(), -1);
  for (int u = 0; u < int(P.units.size()); ++u)
    for (int p = 0; p < int(P.params.size()); ++p)
      if (P.params[p].offset >= P.units[u].begin && P.params[p].offset < P.units[u].end)
        param_unit[p] = u;
  shards = make_shards(P.total, l.dp);
  use_bucket = l.zero >= 2 && l.dp > 1;
  tied_full = use_bucket && m.tie_embeddings && l.pp > 1 && (stage == 0 || stage == l.pp - 1);
  states.resize(std::size_t(l.vpp) * M);
}

std::int64_t Exec::largest_grad_group() const {
  auto n = [&](int p) { return p < 0 ? std::int64_t(0) : P.params[p].numel(); };
  std::int64_t g = std::max({n(P.word_emb), n(P.pos_emb), n(P.output_w), n(P.final_norm_w) + n(P.final_norm_b)});
  for (const LayerParams& L : P.layers)
    g = std::max({g, n(L.attn_norm_w) + n(L.attn_norm_b), n(L.qkv_w) + n(L.qkv_b), n(L.out_w) + n(L.out_b),
                  n(L.mlp_norm_w) + n(L.mlp_norm_b), n(L.fc1_w) + n(L.fc1_b), n(L.fc2_w) + n(L.fc2_b)});
  return g;
}

bool Exec::tied_copy(int p) const {
  return tied_full && (p == P.word_emb || (p == P.output_w && P.output_w >= 0));
}

void Exec::allocate_state() {
  A.set_phase("set-up");
  const std::int64_t shard = shards.counts.empty() ? 0 : (P.total + l.dp - 1) / l.dp;
  const std::int64_t own = shards.counts[dp_rank];
  (void)own;
  // Model state (Rajbhandari et al. 2020 §5): every shard is ceil(Ψ / dp).
  weights = Buffer(&A, l.zero >= 3 ? shard : P.total, wdt, Category::kWeights, "parameters");
  grads = Buffer(&A, l.zero >= 2 ? shard : P.total, gdt, Category::kGradients, "gradients");
  const std::int64_t opt_n = l.zero >= 1 ? shard : P.total;
  if (wdt != DType::kFp32)
    master = Buffer(&A, opt_n, DType::kFp32, Category::kOptimizer, "fp32 master weights");
  adam_m = Buffer(&A, opt_n, DType::kFp32, Category::kOptimizer, "Adam m");
  adam_v = Buffer(&A, opt_n, DType::kFp32, Category::kOptimizer, "Adam v");
  if (tied_full) {
    const int p = stage == 0 ? P.word_emb : P.output_w;
    emb_grad = Buffer(&A, P.params[p].numel(), gdt, Category::kGradients, "tied embedding gradient");
  }
  // Communication buffers.
  if (l.zero >= 3)
    for (Buffer& g : gather) g = Buffer(&A, P.largest_unit, wdt, Category::kComm, "ZeRO-3 gather");
  if (use_bucket) {
    // A bucket holds whole gradient groups (a weight and its bias): at least the largest.
    bucket_cap = std::min(P.total, std::max(t.grad_bucket_params, largest_grad_group()));
    bucket = Buffer(&A, bucket_cap, gdt, Category::kComm, "gradient bucket");
  }
  if (l.sp) sp_buf = act_buf(T * h, Category::kComm, "sequence-parallel gather");
  if (l.pp > 1) {
    // Forward sends unless this rank only ever runs the last virtual stage;
    // backward sends unless it only runs the first.
    const bool sends_fwd = l.vpp > 1 || stage < l.pp - 1, sends_bwd = l.vpp > 1 || stage > 0;
    if (sends_fwd) send_slot[0] = act_buf(Tl * h, Category::kComm, "pipeline send (forward)");
    if (sends_bwd) send_slot[1] = act_buf(Tl * h, Category::kComm, "pipeline send (backward)");
  }
}

void Exec::init_weights() {
  // Each element from its global index, so every layout starts from the same model.
  std::vector<float> host;
  const std::int64_t lo = l.zero >= 3 ? shards.displs[dp_rank] : 0;
  const std::int64_t hi = l.zero >= 3 ? lo + shards.counts[dp_rank] : P.total;
  const std::int64_t opt_lo = l.zero >= 1 ? shards.displs[dp_rank] : 0;
  const std::int64_t opt_hi = l.zero >= 1 ? opt_lo + shards.counts[dp_rank] : P.total;
  for (const ParamDesc& p : P.params) {
    const std::int64_t a = std::max(lo, p.offset), e = std::min(hi, p.offset + p.numel());
    const std::int64_t oa = std::max(opt_lo, p.offset), oe = std::min(opt_hi, p.offset + p.numel());
    if (a >= e && oa >= oe) continue;
    // Only the elements this rank holds, drawn on every core: a pure function
    // of the index, so the threads' split changes nothing (7B on one rank: a
    // minute and a half on one core).
    const std::int64_t i0 = std::min(a < e ? a : oa, oa < oe ? oa : a) - p.offset;
    const std::int64_t i1 = std::max(a < e ? e : oe, oa < oe ? oe : e) - p.offset;
    host.resize(std::size_t(i1 - i0));
    const auto fill = [&](std::int64_t from, std::int64_t to) {
      for (std::int64_t i = from; i < to; ++i) host[std::size_t(i - i0)] = init_value(p, i / p.cols, i % p.cols, cfg.seed);
    };
    const std::int64_t n = i1 - i0;
    const int threads = int(std::min<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()), n / (1 << 20) + 1));
    std::vector<std::thread> pool;
    for (int k = 1; k < threads; ++k) pool.emplace_back(fill, i0 + n * k / threads, i0 + n * (k + 1) / threads);
    fill(i0, i0 + n / threads);
    for (std::thread& th : pool) th.join();
    if (a < e) dev.from_host(host.data() + (a - p.offset - i0), weights.at(a - lo), e - a);
    if (master && oa < oe) dev.from_host(host.data() + (oa - p.offset - i0), master.at(oa - opt_lo), oe - oa);
  }
}

// ---- parameters under ZeRO-3 ----

void Exec::use_unit(int unit) {
  if (l.zero < 3 || unit < 0 || gathered[0] == unit || gathered[1] == unit) return;
  const Unit& u = P.units[unit];
  Buffer& g = gather[gather_next];
  // Every dp rank contributes the part of the unit inside its shard.
  std::vector<std::int64_t> counts(l.dp), displs(l.dp);
  for (int r = 0; r < l.dp; ++r) {
    const std::int64_t a = std::clamp(shards.displs[r], u.begin, u.end);
    const std::int64_t e = std::clamp(shards.displs[r] + shards.counts[r], u.begin, u.end);
    displs[r] = a - u.begin, counts[r] = e - a;
  }
  const std::int64_t mine = counts[dp_rank];
  if (mine > 0)
    dev.copy(weights.at(u.begin + displs[dp_rank] - shards.displs[dp_rank]), g.at(displs[dp_rank]), mine);
  G.dp->all_gather_v(g.ref(), counts, displs);
  gathered[gather_next] = unit;
  gather_next ^= 1;
}

Ref Exec::W(int p) {
  const ParamDesc& d = P.params[p];
  if (l.zero < 3) return weights.at(d.offset);
  const int u = param_unit[p];
  use_unit(u);
  const int slot = gathered[0] == u ? 0 : 1;
  return gather[slot].at(d.offset - P.units[u].begin);
}

// ---- gradients: full buffer, or ZeRO-2/3 buckets reduced per micro-batch ----

void Exec::grads_for(int p0, int p1) {
  cur_params.clear();
  cur_grads.clear();
  std::int64_t a = INT64_MAX, e = 0;
  if (p0 < 0) p0 = p1;
  if (p1 < 0) p1 = p0;  // a missing bias: the weight alone
  for (int p = std::min(p0, p1); p <= std::max(p0, p1); ++p) {
    if (p < 0) continue;
    cur_params.push_back(p);
    if (!use_bucket || tied_copy(p)) continue;
    a = std::min(a, P.params[p].offset);
    e = std::max(e, P.params[p].offset + P.params[p].numel());
  }
  if (use_bucket && e > a) {
    // The bucket fills downwards through the flat vector (backward order);
    // a range that does not extend it contiguously, or overflows it, flushes it.
    if (!bucket_empty && (e != bucket_lo || bucket_hi - a > bucket_cap)) flush_bucket();
    if (bucket_empty) bucket_hi = e, bucket_empty = false;
    if (bucket_hi - a > bucket_cap) throw std::logic_error("gradient group larger than the bucket");
    bucket_lo = a;
    dev.fill(bucket.at(bucket_cap - (bucket_hi - a)), e - a, 0.0f);
  }
  for (int p : cur_params) {
    const ParamDesc& d = P.params[p];
    if (tied_copy(p)) cur_grads.push_back(emb_grad.ref());
    else if (!use_bucket) cur_grads.push_back(grads.at(d.offset));
    else cur_grads.push_back(bucket.at(bucket_cap - (bucket_hi - d.offset)));
  }
}

Ref Exec::Gr(int p) {
  if (p < 0) return Ref();
  for (std::size_t i = 0; i < cur_params.size(); ++i)
    if (cur_params[i] == p) return cur_grads[i];
  throw std::logic_error("gradient target not prepared for " + P.params[p].name);
}

void Exec::reduce_range_into_shard(Ref buf, std::int64_t a, std::int64_t e) {
  std::vector<std::int64_t> counts(l.dp), displs(l.dp);
  for (int r = 0; r < l.dp; ++r) {
    const std::int64_t lo = std::clamp(shards.displs[r], a, e);
    const std::int64_t hi = std::clamp(shards.displs[r] + shards.counts[r], a, e);
    displs[r] = lo - a, counts[r] = hi - lo;
  }
  G.dp->reduce_scatter_v(buf, counts, displs);
  if (counts[dp_rank] > 0)
    dev.axpy(1.0f, buf.at(displs[dp_rank]), grads.at(a + displs[dp_rank] - shards.displs[dp_rank]),
             counts[dp_rank]);
}

void Exec::flush_bucket() {
  if (bucket_empty) return;
  const Ref base = bucket.at(bucket_cap - (bucket_hi - bucket_lo));
  // Sequence parallelism leaves replicated parameters with partial gradients
  // (each tp rank saw a slice of the sequence): sum them over tp first.
  if (l.sp && l.tp > 1)
    for (const ParamDesc& d : P.params)
      if (d.tp_replicated && d.offset >= bucket_lo && d.offset < bucket_hi)
        G.tp->all_reduce(base.at(d.offset - bucket_lo), d.numel(), ReduceOp::kSum);
  reduce_range_into_shard(base, bucket_lo, bucket_hi);
  bucket_empty = true;
}

void Exec::reduce_gradients() {
  A.set_phase(fmt::format("step {} gradient reduction", step_no));
  flush_bucket();
  if (!use_bucket && l.sp && l.tp > 1)
    for (const ParamDesc& d : P.params)
      if (d.tp_replicated) G.tp->all_reduce(grads.at(d.offset), d.numel(), ReduceOp::kSum);
  // Tied embeddings across stages: the first stage's embedding and the last
  // stage's output copy get the sum of both gradients (Megatron-LM).
  if (G.embedding && m.tie_embeddings && l.pp > 1) {
    const int p = stage == 0 ? P.word_emb : P.output_w;
    const Ref g = tied_full ? emb_grad.ref() : grads.at(P.params[p].offset);
    G.embedding->all_reduce(g, P.params[p].numel(), ReduceOp::kSum);
    if (tied_full) reduce_range_into_shard(g, P.params[p].offset, P.params[p].offset + P.params[p].numel());
  }
  if (use_bucket) return;  // already reduced into the shards
  if (l.zero == 0) G.dp->all_reduce(grads.ref(), P.total, ReduceOp::kSum);
  else if (l.dp > 1) G.dp->reduce_scatter_v(grads.ref(), shards.counts, shards.displs);
}

void Exec::grad_checksums() {
  // Each global element is reported by exactly one rank: its ZeRO owner (or
  // dp rank 0 without sharding), tp rank 0 for replicated tensors, and the
  // first stage for a tied embedding's copy.
  const bool sharded = l.zero >= 1;
  const std::int64_t lo = sharded ? shards.displs[dp_rank] : 0;
  const std::int64_t hi = sharded ? lo + shards.counts[dp_rank] : P.total;
  if (!sharded && dp_rank != 0) return;
  std::vector<float> host;
  for (int p = 0; p < int(P.params.size()); ++p) {
    const ParamDesc& d = P.params[p];
    GradCheck c{d.name, 0, 0};
    const bool skip = (d.tp_replicated && tp_rank != 0) ||
                      (p == P.output_w && m.tie_embeddings && l.pp > 1 && stage != 0);
    const std::int64_t a = std::max(lo, d.offset), e = std::min(hi, d.offset + d.numel());
    if (!skip && a < e) {
      host.resize(std::size_t(e - a));
      const Ref src = l.zero >= 2 ? grads.at(a - lo) : grads.at(a);
      dev.to_host(src, host.data(), e - a);
      for (std::int64_t i = a; i < e; ++i) {
        const std::int64_t li = i - d.offset;
        const std::int64_t gi = d.global_index(li / d.cols, li % d.cols);
        if (gi < 0) continue;
        const double v = host[std::size_t(i - a)];
        c.sum_sq += v * v;
        c.sum_w += v * (hash_uniform(cfg.seed ^ 0x9e3779b97f4a7c15ull, 0, gi) - 0.5);
      }
    }
    checks.push_back(c);
  }
}

void Exec::optimizer_step(int k) {
  A.set_phase(fmt::format("step {} optimizer", k));
  ScopedPhase timed(&timer, "optimizer");
  const std::int64_t lo = l.zero >= 1 ? shards.displs[dp_rank] : 0;
  const std::int64_t n = l.zero >= 1 ? shards.counts[dp_rank] : P.total;
  const Ref grad = l.zero >= 2 ? grads.ref() : grads.at(lo);
  const Ref param = l.zero >= 3 ? weights.ref() : weights.at(lo);
  // fp32: the weights are the master copy; mixed: fp32 master, bf16 weights.
  float* mst = master ? master.as<float>() : param.f32();
  if (n > 0)
    dev.adam(mst, adam_m.as<float>(), adam_v.as<float>(), grad, master ? param : Ref(), n, cfg.lr,
             cfg.beta1, cfg.beta2, cfg.eps, k + 1, 1.0f);
  if (l.zero >= 1 && l.zero < 3 && l.dp > 1) G.dp->all_gather_v(weights.ref(), shards.counts, shards.displs);
  gathered[0] = gathered[1] = -1;  // ZeRO-3 gathers are stale after an update
}

double Exec::step(int k) {
  step_no = k;
  dev.fill(grads.ref(), grads.numel(), 0.0f);
  if (emb_grad) dev.fill(emb_grad.ref(), emb_grad.numel(), 0.0f);
  loss_sum = 0;
  run_schedule();
  for (auto& r : send_req)
    if (r) {
      ScopedPhase wait(&timer, "pp send_wait");
      r->wait(), r.reset();
    }
  reduce_gradients();
  if (cfg.grad_check && k == 0) grad_checksums();
  optimizer_step(k);
  // The mean loss over the global batch, known to every rank: the last
  // stage's tp rank 0 of each dp rank contributes its sum.
  float v = (stage == l.pp - 1 && tp_rank == 0) ? float(loss_sum) : 0.0f;
  const Ref sum = loss_scalar.ref(DType::kFp32);
  dev.from_host(&v, sum, 1);
  G.world->all_reduce(sum, 1, ReduceOp::kSum);
  dev.to_host(sum, &v, 1);
  return double(v) / double(std::int64_t(t.global_batch_size) * s);
}

// The executor's phases, summed into the time model's terms: compute is each
// phase's own time less the collectives inside it; a collective counts to the
// group it ran on (the tied-embedding group is pipeline traffic; the world
// group carries only the loss, in no term).
static PhaseSeconds phase_seconds(const PhaseTimer& timer) {
  PhaseSeconds p;
  for (const auto& [name, tot] : timer.totals()) {
    const double sec = tot.self_ms / 1e3;
    const std::string group = name.substr(0, name.find(' '));
    if (name == "forward") p.forward += sec;
    else if (name == "backward") p.backward += sec;
    else if (name == "optimizer") p.optimizer += sec;
    else if (group == "tp") p.tp_comm += sec;
    else if (group == "pp" || group == "embedding") p.pp_comm += sec;
    else if (group == "dp") p.dp_comm += sec;
  }
  return p;
}

RankResult Exec::run() {
  allocate_state();
  init_weights();
  RankResult r;
  r.rank = cfg.rank, r.stage = stage, r.tp_rank = tp_rank, r.dp_rank = dp_rank;
  for (int k = 0; k < cfg.steps; ++k) {
    dev.synchronize();
    const double before_ms = timer.total("step").ms;
    timer.begin("step");
    r.loss.push_back(step(k));
    timer.end("step");
    timer.collect();  // waits for the device's clock
    r.step_seconds.push_back((timer.total("step").ms - before_ms) / 1e3);
    if (k == 0 && cfg.steps > 1) timer.clear_totals();  // the first step warms caches; phases from step 2 on
  }
  r.phases = phase_seconds(timer);
  for (const auto& [name, tot] : timer.totals()) {
    r.phase_totals_s[name] = tot.ms / 1e3;
    r.phase_counts[name] = tot.count;
  }
  for (int c = 0; c < kNumCategories; ++c) {
    r.peak.bytes[c] = A.stats(Category(c)).peak;
    r.peak_phase[c] = A.stats(Category(c)).peak_phase;
  }
  r.total_peak = A.peak();
  r.total_peak_phase = A.peak_phase();
  r.at_total_peak = A.at_peak();
  r.grads = checks;
  r.allocations = A.allocations();
  return r;
}

}  // namespace detail

RankResult run_rank(const RunConfig& cfg, Device& dev, TrackingAllocator& alloc, Groups& groups) {
  // The spec loader refuses this; a caller building its own spec must too
  // (the position lookup would read past the table).
  if (cfg.spec.training.seq_length > max_seq_length(cfg.spec.model))
    throw std::invalid_argument("run_rank: seq_length " + std::to_string(cfg.spec.training.seq_length) + ": " +
                                seq_length_limit_message(cfg.spec.model));
  detail::Exec e(cfg, dev, alloc, groups);
  RankResult r = e.run();
  // Measured while the run's buffers and communicators are still held: on
  // the GPU, what the process took beyond the pool and the pool's slack.
  const MemoryResource::Outside o = alloc.backing().outside();
  r.peak[Category::kRuntime] = o.runtime;
  r.peak[Category::kFragmentation] = o.fragmentation;
  return r;
}

}  // namespace paraplan::validate
