// The ranked table's view-model: which candidates are shown (filters), in
// which order (sort by any column), and the text of every cell. No ImGui; the
// table view draws rows() and gui/tests/test_table_model.cpp checks them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/search.hpp"

namespace paraplan::gui {

enum class Column {
  kRank,       // position in the plan: fitting layouts first, by step time
  kLayout,     // the canonical layout string; sorts field by field (dp, tp, pp, ...)
  kDp,
  kTp,
  kPp,
  kVpp,
  kSp,
  kZero,
  kRecompute,  // none < selective < full
  kMbs,
  kSchedule,   // 1f1b < gpipe
  kFits,       // fits < OOM
  kPeak,       // peak memory of the heaviest stage
  kStep,       // the ranked step time (Candidate::ranked_step_s; "^": held to the best published utilization)
  kTokens,     // tokens per second
  kMfu,
  kBubble,     // bubble fraction of the pipeline time
  kComm,       // exposed communication fraction of the step
  kCp,         // context-parallel size
  kEp,         // expert-parallel size
  kHfu,        // hardware FLOP utilization of the raw prediction
  kWarn,       // "cap": held to the best published utilization; "warned": ranked after the unwarned
  kCount
};
inline constexpr int kNumColumns = int(Column::kCount);
const char* column_name(Column c);
// Short key of a column for the command line: rank, layout, dp, tp, pp, vpp, sp,
// zero, recompute, mbs, schedule, fits, peak, step, tokens, mfu, bubble, comm, cp, ep, hfu, warn.
const char* column_key(Column c);
bool parse_column(const std::string& key, Column* out);
// The text of one cell (units in the column name: GiB, s, %).
std::string cell_text(const Candidate& c, int rank, Column col);

// Three-way comparison of two candidates on one column (-1, 0, 1).
int compare_on(const Candidate& a, int rank_a, const Candidate& b, int rank_b, Column col);

struct TableFilter {
  bool fits_only = false;
  bool pareto_only = false;
  std::uint8_t zero_mask = 0xF;       // bit z: show ZeRO stage z
  std::uint8_t recompute_mask = 0x7;  // bit r: show Recompute(r)
  // Space-separated terms, all of which must match. A term with '=' must equal
  // one whole field of the layout string ("pp=1" does not match "pp=16");
  // a term without '=' is a substring of it ("gpipe", "selective").
  std::string text;
  bool operator==(const TableFilter&) const = default;
};

struct SortSpec {
  Column column = Column::kRank;
  bool ascending = true;
  bool operator==(const SortSpec&) const = default;
};

// Candidate indices that pass the filter, in plan order. `layout_text[i]` is
// to_string(plan.candidates[i].layout) (precomputed once per plan).
std::vector<int> filter_rows(const Plan& plan, const std::vector<std::string>& layout_text,
                             const TableFilter& f);
// Sorts candidate indices on one column; ties keep plan order, whatever the direction.
void sort_rows(const Plan& plan, const SortSpec& s, std::vector<int>* rows);

// Rows of the current plan under the current filter and sort, recomputed only
// when one of them changes.
class TableModel {
 public:
  // Call once per frame; cheap when nothing changed. `plan_id` identifies the plan.
  void update(const Plan* plan, const std::vector<std::string>* layout_text, std::uint64_t plan_id,
              const TableFilter& f, const SortSpec& s);
  const std::vector<int>& rows() const { return rows_; }
  // Position of candidate `index` among rows(), -1 when filtered out.
  int row_of(int index) const;
  // Per candidate: 1 when it passes the filter (for dimming chart points).
  const std::vector<std::uint8_t>& visible() const { return visible_; }
  // How many of rows() fit in memory.
  int fitting() const { return fitting_; }
  double last_update_ms() const { return last_ms_; }

 private:
  std::uint64_t plan_id_ = ~0ull;
  TableFilter filter_;
  SortSpec sort_;
  std::vector<int> rows_;
  std::vector<int> row_of_;
  std::vector<std::uint8_t> visible_;
  int fitting_ = 0;
  double last_ms_ = 0;
};

}  // namespace paraplan::gui
