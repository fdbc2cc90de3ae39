#include "gui/model/table_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <sstream>
#include <tuple>

#include "costmodel/memory.hpp"

namespace paraplan::gui {

const char* column_name(Column c) {
  switch (c) {
    case Column::kRank: return "#";
    case Column::kLayout: return "layout";
    case Column::kDp: return "dp";
    case Column::kTp: return "tp";
    case Column::kPp: return "pp";
    case Column::kVpp: return "vpp";
    case Column::kSp: return "sp";
    case Column::kZero: return "zero";
    case Column::kRecompute: return "recompute";
    case Column::kMbs: return "mbs";
    case Column::kSchedule: return "schedule";
    case Column::kFits: return "fits";
    case Column::kPeak: return "peak GiB";
    case Column::kStep: return "step s";
    case Column::kTokens: return "tokens/s";
    case Column::kMfu: return "MFU %";
    case Column::kBubble: return "bubble %";
    case Column::kComm: return "comm %";
    case Column::kCp: return "cp";
    case Column::kEp: return "ep";
    case Column::kHfu: return "HFU %";
    case Column::kWarn: return "warning";
    case Column::kCount: break;
  }
  return "?";
}

const char* column_key(Column c) {
  static const char* const keys[] = {"rank", "layout", "dp",   "tp",   "pp",     "vpp",    "sp",  "zero",   "recompute",
                                     "mbs",  "schedule", "fits", "peak", "step", "tokens", "mfu", "bubble", "comm", "cp",
                                     "ep",   "hfu",      "warn"};
  static_assert(std::size(keys) == size_t(kNumColumns));
  const int i = int(c);
  return i >= 0 && i < kNumColumns ? keys[i] : "?";
}

bool parse_column(const std::string& key, Column* out) {
  for (int c = 0; c < kNumColumns; ++c)
    if (key == column_key(Column(c))) return *out = Column(c), true;
  return false;
}

namespace {

// A per-second figure of the raw prediction at the ranked step instead.
double at_ranked_step(const Candidate& c, double x) {
  return c.ranked_step_s() > 0 ? x * c.time.step_s / c.ranked_step_s() : x;
}

}  // namespace

std::string cell_text(const Candidate& c, int rank, Column col) {
  const Layout& l = c.layout;
  switch (col) {
    case Column::kRank: return std::to_string(rank);
    case Column::kLayout: return to_string(l);
    case Column::kDp: return std::to_string(l.dp);
    case Column::kTp: return std::to_string(l.tp);
    case Column::kPp: return std::to_string(l.pp);
    case Column::kVpp: return std::to_string(l.vpp);
    case Column::kSp: return l.sp ? "1" : "0";
    case Column::kZero: return std::to_string(l.zero);
    case Column::kRecompute: return recompute_name(l.recompute);
    case Column::kMbs: return std::to_string(l.mbs);
    case Column::kSchedule: return schedule_name(l.schedule);
    case Column::kFits: return c.fits ? "yes" : "OOM";
    case Column::kPeak: return fmt::format("{:.2f}", double(c.peak_bytes) / kGiB);
    case Column::kStep: return fmt::format("{:.3f}{}", c.ranked_step_s(), c.time.clamped() ? "^" : "");
    // At the ranked step, as the CLI's table shows them (HFU stays the raw prediction's).
    case Column::kTokens: return fmt::format("{:.0f}", at_ranked_step(c, c.time.tokens_per_s));
    case Column::kMfu: return fmt::format("{:.1f}", 100 * at_ranked_step(c, c.time.mfu));
    case Column::kBubble: return fmt::format("{:.1f}", 100 * c.time.bubble_fraction);
    case Column::kComm: return fmt::format("{:.1f}", 100 * c.time.exposed_comm_fraction);
    case Column::kCp: return std::to_string(c.layout.cp);
    case Column::kEp: return std::to_string(c.layout.ep);
    case Column::kHfu: return fmt::format("{:.1f}", 100 * c.time.hfu);
    case Column::kWarn: return c.warned() ? "warned" : c.time.clamped() ? "cap" : "";
    case Column::kCount: break;
  }
  return "";
}

namespace {

template <class T>
int cmp(const T& a, const T& b) {
  return a < b ? -1 : b < a ? 1 : 0;
}

auto layout_key(const Layout& l) {
  return std::make_tuple(l.dp, l.tp, l.cp, l.pp, l.vpp, int(l.sp), l.zero, int(l.recompute), l.mbs,
                         int(l.schedule), l.first_stage_layers, l.last_stage_layers, int(l.recompute_method),
                         l.recompute_layers, l.microbatch_group);
}

// Splits the layout string into its "key=value" fields.
bool has_field(const std::string& layout, const std::string& term) {
  size_t start = 0;
  while (start <= layout.size()) {
    size_t end = layout.find(',', start);
    if (end == std::string::npos) end = layout.size();
    if (layout.compare(start, end - start, term) == 0) return true;
    start = end + 1;
  }
  return false;
}

bool text_matches(const std::string& layout, const std::vector<std::string>& terms) {
  for (const std::string& t : terms) {
    const bool ok = t.find('=') != std::string::npos ? has_field(layout, t)
                                                     : layout.find(t) != std::string::npos;
    if (!ok) return false;
  }
  return true;
}

std::vector<std::string> split_terms(const std::string& text) {
  std::vector<std::string> terms;
  std::istringstream in(text);
  for (std::string t; in >> t;) terms.push_back(t);
  return terms;
}

}  // namespace

int compare_on(const Candidate& a, int ra, const Candidate& b, int rb, Column col) {
  const Layout &x = a.layout, &y = b.layout;
  switch (col) {
    case Column::kRank: return cmp(ra, rb);
    case Column::kLayout: return cmp(layout_key(x), layout_key(y));
    case Column::kDp: return cmp(x.dp, y.dp);
    case Column::kTp: return cmp(x.tp, y.tp);
    case Column::kPp: return cmp(x.pp, y.pp);
    case Column::kVpp: return cmp(x.vpp, y.vpp);
    case Column::kSp: return cmp(int(x.sp), int(y.sp));
    case Column::kZero: return cmp(x.zero, y.zero);
    case Column::kRecompute: return cmp(int(x.recompute), int(y.recompute));
    case Column::kMbs: return cmp(x.mbs, y.mbs);
    case Column::kSchedule: return cmp(int(x.schedule), int(y.schedule));
    case Column::kFits: return cmp(int(!a.fits), int(!b.fits));
    case Column::kPeak: return cmp(a.peak_bytes, b.peak_bytes);
    case Column::kStep: return cmp(a.ranked_step_s(), b.ranked_step_s());
    case Column::kTokens: return cmp(at_ranked_step(a, a.time.tokens_per_s), at_ranked_step(b, b.time.tokens_per_s));
    case Column::kMfu: return cmp(at_ranked_step(a, a.time.mfu), at_ranked_step(b, b.time.mfu));
    case Column::kBubble: return cmp(a.time.bubble_fraction, b.time.bubble_fraction);
    case Column::kComm: return cmp(a.time.exposed_comm_fraction, b.time.exposed_comm_fraction);
    case Column::kCp: return cmp(a.layout.cp, b.layout.cp);
    case Column::kEp: return cmp(a.layout.ep, b.layout.ep);
    case Column::kHfu: return cmp(a.time.hfu, b.time.hfu);
    case Column::kWarn: return cmp(2 * int(a.warned()) + int(a.time.clamped()), 2 * int(b.warned()) + int(b.time.clamped()));
    case Column::kCount: break;
  }
  return 0;
}

std::vector<int> filter_rows(const Plan& plan, const std::vector<std::string>& text,
                             const TableFilter& f) {
  std::vector<std::uint8_t> on_front;
  if (f.pareto_only) {
    on_front.assign(plan.candidates.size(), 0);
    for (int i : plan.pareto) on_front[i] = 1;
  }
  const std::vector<std::string> terms = split_terms(f.text);
  std::vector<int> rows;
  for (int i = 0; i < int(plan.candidates.size()); ++i) {
    const Candidate& c = plan.candidates[i];
    if (f.fits_only && !c.fits) continue;
    if (f.pareto_only && !on_front[i]) continue;
    if (!(f.zero_mask >> c.layout.zero & 1)) continue;
    if (!(f.recompute_mask >> int(c.layout.recompute) & 1)) continue;
    if (!terms.empty() && !text_matches(text[i], terms)) continue;
    rows.push_back(i);
  }
  return rows;
}

void sort_rows(const Plan& plan, const SortSpec& s, std::vector<int>* rows) {
  const auto& c = plan.candidates;
  std::sort(rows->begin(), rows->end(), [&](int a, int b) {
    int r = compare_on(c[a], a + 1, c[b], b + 1, s.column);
    if (!s.ascending) r = -r;
    return r != 0 ? r < 0 : a < b;
  });
}

void TableModel::update(const Plan* plan, const std::vector<std::string>* text, std::uint64_t id,
                        const TableFilter& f, const SortSpec& s) {
  if (id == plan_id_ && f == filter_ && s == sort_) return;
  const auto t0 = std::chrono::steady_clock::now();
  plan_id_ = id, filter_ = f, sort_ = s;
  rows_.clear();
  if (plan && text) {
    rows_ = filter_rows(*plan, *text, f);
    sort_rows(*plan, s, &rows_);
  }
  const size_t n = plan ? plan->candidates.size() : 0;
  row_of_.assign(n, -1);
  visible_.assign(n, 0);
  fitting_ = 0;
  for (int r = 0; r < int(rows_.size()); ++r) {
    row_of_[rows_[r]] = r, visible_[rows_[r]] = 1;
    fitting_ += plan->candidates[rows_[r]].fits;
  }
  last_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int TableModel::row_of(int index) const {
  return index >= 0 && index < int(row_of_.size()) ? row_of_[index] : -1;
}

}  // namespace paraplan::gui
