#include "gui/model/inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "planner/spec_error.hpp"
#include "planner/spec_loader.hpp"

namespace paraplan::gui {

namespace {

// SpecError::one_line(), spelled with fmt: GCC 12 reports a false -Wrestrict
// in that inline function's string concatenation when inlined here.
std::string error_line(const SpecError& e) {
  std::string loc = e.line() > 0 ? fmt::format("{}:{}", e.file(), e.line()) : e.file();
  if (!e.field().empty()) loc = loc.empty() ? e.field() : fmt::format("{}: {}", loc, e.field());
  return fmt::format("{}: {}", loc, e.what());
}

template <class F>
bool guarded(Inputs* in, F&& load) {
  try {
    load();
    in->error.clear();
    ++in->revision;
    return true;
  } catch (const SpecError& e) {
    in->error = error_line(e);
  } catch (const std::exception& e) {
    in->error = e.what();
  }
  return false;
}

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

template <class T>
bool toggle_enum(std::vector<T>* list, T v, std::initializer_list<T> all) {
  if (list->empty()) {
    for (T x : all)
      if (x != v) list->push_back(x);
    return true;
  }
  auto it = std::find(list->begin(), list->end(), v);
  if (it != list->end()) {
    if (list->size() == 1) return false;
    list->erase(it);
    return true;
  }
  list->push_back(v);
  if (list->size() >= all.size()) list->clear();
  return true;
}

}  // namespace

bool load_spec_into(Inputs* in, const std::string& path) {
  return guarded(in, [&] {
    Spec s = load_spec_file(path);
    in->spec = std::move(s);
    in->loaded = true;
    in->spec_path = path;
    in->model_label = in->spec.model.name + " (from " + file_name(path) + ")";
    in->cluster_label = in->spec.cluster.name + " (from " + file_name(path) + ")";
  });
}

bool load_model_into(Inputs* in, const std::string& path) {
  return guarded(in, [&] {
    Model m = load_model_file(path);
    in->spec.model = std::move(m);
    // Keep the sequence within a learned position table (as the spec loader demands).
    in->spec.training.seq_length = std::min(in->spec.training.seq_length, max_seq_length(in->spec.model));
    in->model_label = in->spec.model.name + " (" + file_name(path) + ")";
  });
}

bool load_cluster_into(Inputs* in, const std::string& path) {
  return guarded(in, [&] {
    Cluster c = load_cluster_file(path);
    // Keep the node count within what the loader accepts for the new node size.
    in->spec.num_nodes = std::clamp(in->spec.num_nodes, 1, kMaxGpus / c.gpus_per_node);
    in->spec.cluster = std::move(c);
    // A GPU without BF16 trains in fp16 (the CLI's default there too).
    if (!in->spec.cluster.gpu.bf16 && in->spec.training.precision == DType::kBf16) {
      Training& t = in->spec.training;
      set_precision(&t, DType::kFp16);
      if (t.grad_dtype == DType::kBf16) t.grad_dtype = DType::kFp16;
      if (t.grad_reduce_dtype_given && t.grad_reduce_dtype == DType::kBf16) t.grad_reduce_dtype = DType::kFp16;
    }
    in->cluster_label = in->spec.cluster.name + " (" + file_name(path) + ")";
  });
}

const std::vector<int>& constraint_list(const Spec& s, Dim d) {
  const SearchSpace& q = s.search;
  switch (d) {
    case Dim::kTp: return q.tp;
    case Dim::kPp: return q.pp;
    case Dim::kVpp: return q.vpp;
    case Dim::kMbs: return q.mbs;
    case Dim::kZero: return q.zero;
    case Dim::kSp: return q.sp;
  }
  return q.tp;
}

std::vector<int>* constraint_list(Spec* s, Dim d) {
  return const_cast<std::vector<int>*>(&constraint_list(std::as_const(*s), d));
}

std::vector<int> constraint_choices(const Spec& s, Dim d) {
  std::vector<int> c;
  switch (d) {
    case Dim::kTp:
    case Dim::kPp: c = divisors(s.num_gpus()); break;
    case Dim::kVpp: c = divisors(s.model.num_layers); break;
    case Dim::kMbs: c = divisors(s.training.global_batch_size); break;
    case Dim::kZero: c = {0, 1, 2, 3}; break;
    case Dim::kSp: c = {0, 1}; break;
  }
  for (int v : constraint_list(s, d))
    if (std::find(c.begin(), c.end(), v) == c.end()) c.push_back(v);
  std::sort(c.begin(), c.end());
  return c;
}

bool constraint_allows(const std::vector<int>& list, int v) {
  return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

bool toggle_constraint(std::vector<int>* list, int v, const std::vector<int>& choices) {
  if (list->empty()) {
    if (std::none_of(choices.begin(), choices.end(), [&](int x) { return x != v; })) return false;
    for (int x : choices)
      if (x != v) list->push_back(x);
    return true;
  }
  auto it = std::find(list->begin(), list->end(), v);
  if (it != list->end()) {
    if (list->size() == 1) return false;
    list->erase(it);
    return true;
  }
  list->push_back(v);
  std::sort(list->begin(), list->end());
  if (std::all_of(choices.begin(), choices.end(), [&](int x) { return constraint_allows(*list, x); }))
    list->clear();
  return true;
}

bool toggle_recompute(std::vector<Recompute>* list, Recompute r) {
  return toggle_enum(list, r, {Recompute::kNone, Recompute::kSelective, Recompute::kFull});
}

bool toggle_schedule(std::vector<Schedule>* list, Schedule s) {
  return toggle_enum(list, s, {Schedule::k1F1B, Schedule::kGPipe});
}

namespace {
template <class T>
void set_if(Inputs* in, T* field, T v) {
  if (*field == v) return;
  *field = v;
  ++in->revision;
}
}  // namespace

void set_nodes(Inputs* in, int n) {
  set_if(in, &in->spec.num_nodes, std::clamp(n, 1, kMaxGpus / std::max(1, in->spec.cluster.gpus_per_node)));
}
void set_global_batch(Inputs* in, int gbs) {
  set_if(in, &in->spec.training.global_batch_size, std::clamp(gbs, 1, kMaxBatch));
}
void set_seq_length(Inputs* in, int seq) {
  // Not past a learned position table (GPT-2: 1024 rows).
  set_if(in, &in->spec.training.seq_length, std::clamp(seq, 1, max_seq_length(in->spec.model)));
}
void set_precision_of(Inputs* in, DType p) {
  Training& t = in->spec.training;
  if (t.precision == p) return;
  if (p == DType::kBf16 && !in->spec.cluster.gpu.bf16) {
    in->error = "precision: " + no_bf16_reason(in->spec.cluster.gpu) + "; expected fp16 or fp32";
    return;
  }
  set_precision(&t, p);
  // fp16 gradients need fp16 compute (the loader's rule): fall back to the precision.
  if (t.grad_dtype == DType::kFp16 && p != DType::kFp16) t.grad_dtype = p;
  ++in->revision;
}
void set_headroom(Inputs* in, double f) {
  set_if(in, &in->spec.memory_headroom, std::clamp(f, 0.0, 0.99));
}
void set_framework(Inputs* in, Framework f) {
  if (int(f) < 0 || int(f) >= kNumFrameworks) return;
  set_if(in, &in->spec.training.framework, f);
}

}  // namespace paraplan::gui
