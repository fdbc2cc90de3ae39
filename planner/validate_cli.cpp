#include "planner/validate_cli.hpp"

#include <sys/prctl.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "costmodel/memory.hpp"
#include "planner/launch.hpp"
#include "planner/progress.hpp"
#include "planner/layout_source.hpp"
#include "planner/spec_error.hpp"
#include "planner/spec_loader.hpp"
#include "validate/backend.hpp"
#include "validate/compare.hpp"
#include "validate/executor.hpp"

namespace paraplan {

namespace fs = std::filesystem;
using namespace validate;

CLI::App* add_validate_command(CLI::App& app, ValidateOptions* o) {
  CLI::App* v = app.add_subcommand(
      "validate", "run real sharded training steps of a layout and compare measured memory and time with the prediction");
  v->add_option("SPEC", o->spec, "plan spec (YAML)")->required();
  o->layout_opt = v->add_option("--layout", o->layout, "layout, e.g. dp=2,tp=2,pp=2,zero=1,recompute=selective,mbs=1");
  o->megatron_opt = v->add_option("--megatron-args", o->megatron, "the layout as Megatron-LM arguments");
  o->deepspeed_opt = v->add_option("--deepspeed-config", o->deepspeed, "the layout from a DeepSpeed JSON config");
  v->add_option("--steps", o->steps, "training steps to run (default 3)")->check(CLI::Range(1, 100000));
  v->add_option("--backend", o->backend, "cpu | gpu")->check(CLI::IsMember({"cpu", "gpu"}));
  v->add_option("--format", o->format, "table | json")->check(CLI::IsMember({"table", "json"}));
  v->add_option("--launcher", o->launcher, "mpirun (start the ranks) | none (already under mpirun/srun)")
      ->check(CLI::IsMember({"mpirun", "none"}));
  v->add_option("--emulate-rank", o->emulate_rank, "run only this rank, in one process, collectives replaced by local stand-ins")
      ->check(CLI::NonNegativeNumber);
  v->add_option("--memory-limit-gib", o->memory_limit_gib, "refuse allocations past this many GiB per rank (like a GPU would)")
      ->check(CLI::PositiveNumber);
  v->add_option("--tolerance", o->tolerance, "largest relative error of a rank's peak that passes (default 0.02)")
      ->check(CLI::Range(0.0, 10.0));
  v->add_option("--timeout", o->timeout_s, "seconds the whole run may take (default 600)")->check(CLI::PositiveNumber);
  v->add_option("--stall-timeout", o->stall_timeout_s, "seconds without progress on a rank before the run is stopped (default 120)")
      ->check(CLI::PositiveNumber);
  v->add_option("--lr", o->lr, "Adam learning rate (default 1e-3)")->check(CLI::PositiveNumber);
  v->add_option("--seed", o->seed, "seed of the synthetic data, dropout and initialisation");
  v->add_flag("--grad-check", o->grad_check, "record per-tensor gradient checksums at step 1 (JSON: grads)");
  v->add_option("--output", o->output, "write the report to FILE instead of stdout");
  v->add_option("--mpirun-args", o->mpirun_args, "extra arguments for mpirun, e.g. \"--hostfile hosts\"");
  v->add_option("--result-dir", o->result_dir, "(internal) where ranks write results")->group("");
  v->add_option("--debug-stall-rank", o->debug_stall_rank, "(testing) this rank stops making progress")->group("");
  v->add_option("--debug-exit-rank", o->debug_exit_rank, "(testing) this rank exits in its first step")->group("");
  return v;
}

namespace {

struct Resolved {
  Spec spec;
  Layout layout;
  Backend backend;
};

Resolved resolve(ValidateOptions& o) {
  Resolved r;
  if (!parse_backend(o.backend, &r.backend)) throw SpecError("--backend", 0, "", "expected cpu or gpu");
  if (!backend_available(r.backend))
    throw SpecError("--backend", 0, "", "this paraplan was built without CUDA; available: cpu");
  if (!o.layout_opt->count() && !o.megatron_opt->count() && !o.deepspeed_opt->count())
    throw SpecError("--layout", 0, "", "validate needs a layout (--layout, --megatron-args or --deepspeed-config)");
  r.spec = load_spec_file(o.spec);
  if (r.spec.model.is_moe() || r.spec.model.mla())
    throw SpecError(o.spec, 0, "model",
                    r.spec.model.name + " has " + (r.spec.model.is_moe() ? "experts" : "multi-latent attention") +
                        ": the validator's executors run dense transformers only; plan, explain and check predict it");
  // The run has as many ranks as the layout names: size the cluster to it.
  if (o.layout_opt->count()) {
    Layout probe;
    LayoutFields f;
    try {
      parse_layout_into(o.layout, &probe, &f);
    } catch (const LayoutError& e) {
      throw SpecError("--layout", 0, e.field(), e.what());
    }
    if (f.cp && probe.cp > 1)
      throw SpecError("--layout", 0, "cp",
                      "the validator does not execute context parallelism (ring attention); cp > 1 is predicted by "
                      "plan/explain/check, validate runs cp=1");
    if (f.dp) {
      const int n = probe.dp * probe.tp * probe.pp, gpn = r.spec.cluster.gpus_per_node;
      if (n <= gpn) r.spec.num_nodes = 1, r.spec.cluster.gpus_per_node = n;
      else if (n % gpn == 0) r.spec.num_nodes = n / gpn;
      else throw SpecError("--layout", 0, "dp", fmt::format("expected dp*tp*pp ({}) to fill whole nodes of {} GPUs", n, gpn));
    }
  }
  LayoutRequest req;
  if (o.layout_opt->count()) req.layout = o.layout;
  if (o.megatron_opt->count()) req.megatron_args = o.megatron;
  if (o.deepspeed_opt->count()) req.deepspeed_config = o.deepspeed;
  // The run is paraplan's own executor, and its prediction paraplan's profile (validate/compare.cpp
  // prediction_spec): the layout is resolved as that executor runs it (GPipe included).
  r.spec.training.framework = Framework::kParaplan;
  r.layout = layout_from_sources(&r.spec, o.spec, req);
  {
    StageSplit split;
    stage_split(r.spec.model.num_layers, r.layout, &split);
    for (int vs = 0; vs < r.layout.pp * r.layout.vpp; ++vs)
      if (virtual_stage_layers(split, r.layout, vs) < 1)
        throw SpecError("--layout", 0, r.layout.first_stage_layers > 0 ? "first_stage_layers" : "last_stage_layers",
                        fmt::format("the validator runs model chunks of at least one layer; virtual stage {} has none", vs));
  }
  if (r.layout.microbatch_group > 0)
    throw SpecError("--layout", 0, "microbatch_group",
                    "the validator's interleaved schedule runs micro-batches in groups of pp; microbatch_group "
                    "(Megatron's --microbatch-group-size-per-virtual-pipeline-stage) is predicted but not executed");
  if (r.layout.balance == StageBalance::kCost && r.layout.pp > 1)
    throw SpecError("--layout", 0, "balance",
                    "the validator splits layers evenly (or by first/last_stage_layers); nanotron's compute-cost split "
                    "(balance=cost) is predicted by plan/explain/check but not executed");
  if (r.spec.training.fp8)
    throw SpecError(o.spec, 0, "training.fp8",
                    "the validator runs fp32 and bf16; FP8 is predicted by plan/explain/check but not executed");
  if (r.layout.cp > 1)
    throw SpecError("--layout", 0, "cp",
                    "the validator does not execute context parallelism (ring attention); cp > 1 is predicted by "
                    "plan/explain/check, validate runs cp=1");
  if (r.layout.recompute == Recompute::kFull && r.layout.recompute_method == RecomputeMethod::kUniform &&
      r.layout.recompute_layers > 1)
    throw SpecError("--layout", 0, "recompute_layers",
                    "the validator re-runs one layer at a time: uniform recompute with recompute_layers > 1 is "
                    "predicted by plan/explain/check but not executed; use recompute_method=block or recompute_layers=1");
  if (r.spec.model.activation == Activation::kGeglu || r.spec.model.activation == Activation::kRelu2 ||
      r.spec.model.post_norms)
    throw SpecError(o.spec, 0, r.spec.model.post_norms ? "model.post_norms" : "model.activation",
                    "the validator executes GeLU and SwiGLU pre-norm blocks; GeGLU, squared-ReLU (relu2) and post-norm "
                    "(Gemma-2) models are predicted by plan/explain/check but not executed");
  const Training& t = r.spec.training;
  if (t.precision == DType::kFp16 || t.grad_dtype == DType::kFp16)
    throw SpecError(o.spec, 0, "training.precision", "the validator runs fp32 or bf16; fp16 is not supported");
  if (o.emulate_rank && *o.emulate_rank >= r.layout.gpus())
    throw SpecError("--emulate-rank", 0, "", fmt::format("expected a rank below {} (dp*tp*pp)", r.layout.gpus()));
  return r;
}

RunConfig run_config(const Resolved& r, const ValidateOptions& o, int rank) {
  RunConfig c;
  c.spec = r.spec;
  c.layout = r.layout;
  c.rank = rank;
  c.steps = o.steps;
  c.lr = o.lr;
  c.seed = o.seed;
  c.grad_check = o.grad_check;
  return c;
}

std::int64_t limit_bytes(const ValidateOptions& o) {
  return o.memory_limit_gib ? std::int64_t(std::llround(*o.memory_limit_gib * kGiB)) : -1;
}

void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
  }
  std::rename(tmp.c_str(), path.c_str());
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string oom_line(int rank, const OutOfMemory& e) {
  return fmt::format("rank {} ran out of memory in category {} at {}: {}", rank, category_name(e.category),
                     e.phase, e.what());
}

int emit(const ValidateOptions& o, const Comparison& c, std::ostream& out) {
  const std::string text = o.format == "json" ? comparison_json(c).dump(2) + "\n" : render_comparison(c);
  if (o.output.empty()) out << text;
  else write_output(o.output, text);
  return c.pass() ? 0 : 1;
}

// ---- one emulated rank, in this process ----
int run_emulated(const Resolved& r, const ValidateOptions& o, std::ostream& out) {
  const int rank = *o.emulate_rank;
  auto dev = make_device(r.backend);
  auto mem = make_memory(r.backend);
  TrackingAllocator alloc(mem.get(), limit_bytes(o));
  Groups g = make_local_groups(dev.get(), rank, r.layout.tp, r.layout.dp, r.layout.pp, r.spec.model.tie_embeddings);
  RunConfig c = run_config(r, o, rank);
  c.emulated = true;
  ProgressLine progress(fmt::format("validate rank {} of {}", rank, r.layout.gpus()));
  c.progress = [&](const std::string& what) {
    const int step = progress_step(what);
    if (step >= 0) progress.update(fmt::format("step {}/{}", step + 1, o.steps));
  };
  RankResult res;
  try {
    res = run_rank(c, *dev, alloc, g);
    progress.finish();
  } catch (const OutOfMemory& e) {
    std::cerr << "paraplan: " << oom_line(rank, e) << "\n";
    return 1;
  }
  return emit(o, compare(r.spec, r.layout, o.backend, true, {res}, o.tolerance), out);
}

// ---- one rank of a multi-rank run (under mpirun or srun) ----
int run_worker(const Resolved& r, const ValidateOptions& o, std::ostream& out) {
  // A rank dies with the process that launched it (mpirun's daemon): after a
  // stall the launcher kills mpirun, and a stopped or stuck rank must not
  // outlive it. SIGKILL, since a SIGSTOPped rank would never act on SIGTERM.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 3;  // the launcher is already gone
  int rank = 0, size = 1;
  mpi_init(&rank, &size);
  if (size != r.layout.gpus()) {
    if (rank == 0)
      std::cerr << "paraplan: error: --launcher none: started with " << size << " ranks, the layout needs "
                << r.layout.gpus() << "\n";
    mpi_finalize();
    return 2;
  }
  const std::string status = o.result_dir.empty() ? "" : o.result_dir + "/rank-" + std::to_string(rank) + ".status";
  int actions = 0;
  // Heartbeat: one fixed-size record "count action" rewritten in place per
  // schedule action (a pwrite, microseconds); the launcher reads the counts.
  const int beat_fd = status.empty() ? -1 : ::open(status.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  auto beat = [&](int count, const std::string& what) {
    if (beat_fd < 0) return;
    char rec[128];
    std::memset(rec, ' ', sizeof rec);
    // count, wall-clock milliseconds of this action (so the launcher can tell
    // which rank stopped first, however late it polls), what it was.
    const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
    const int len = std::snprintf(rec, sizeof rec - 1, "%d %lld %d %s", count, ms, int(getpid()), what.c_str());
    if (len > 0 && len < int(sizeof rec)) rec[len] = ' ';
    rec[sizeof rec - 1] = '\n';
    if (::pwrite(beat_fd, rec, sizeof rec, 0) < 0) return;
  };
  RunConfig c = run_config(r, o, rank);
  c.progress = [&](const std::string& what) {
    ++actions;
    if (o.debug_exit_rank && *o.debug_exit_rank == rank && actions == 2) std::_Exit(9);
    // The stalled rank also starts late (1 s), as a loaded machine may start
    // it: the launcher must still name it, not the peer that started first.
    if (o.debug_stall_rank && *o.debug_stall_rank == rank && actions == 1)
      std::this_thread::sleep_for(std::chrono::seconds(1));
    if (o.debug_stall_rank && *o.debug_stall_rank == rank && actions == 2)
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    beat(actions, what);
  };
  auto dev = make_device(r.backend, rank % std::max(1, r.spec.cluster.gpus_per_node));
  auto mem = make_memory(r.backend, rank % std::max(1, r.spec.cluster.gpus_per_node));
  TrackingAllocator alloc(mem.get(), limit_bytes(o));
  Groups g = make_groups(r.backend, rank, r.layout.tp, r.layout.dp, r.layout.pp, r.spec.model.tie_embeddings);
  RankResult res;
  try {
    res = run_rank(c, *dev, alloc, g);
  } catch (const OutOfMemory& e) {
    // The others would wait forever in their next collective: stop them all.
    const std::string line = oom_line(rank, e);
    if (!o.result_dir.empty()) write_file(o.result_dir + "/rank-" + std::to_string(rank) + ".error", line);
    std::cerr << "paraplan: " << line << "\n";
    mpi_abort(1);
  }
  beat(actions + 1, "done");
  if (beat_fd >= 0) ::close(beat_fd);
  const std::vector<std::string> all = mpi_gather_strings(rank_result_json(res).dump());
  int code = 0;
  if (rank == 0) {
    std::vector<RankResult> results;
    for (const std::string& s : all) results.push_back(rank_result_from_json(nlohmann::json::parse(s)));
    const Comparison cmp = compare(r.spec, r.layout, o.backend, false, std::move(results), o.tolerance);
    if (!o.result_dir.empty()) {
      write_file(o.result_dir + "/result.txt", render_comparison(cmp));
      write_file(o.result_dir + "/result.json", comparison_json(cmp).dump());
    } else {
      code = emit(o, cmp, out);
    }
  }
  g = Groups{};
  mpi_finalize();
  return code;
}

// ---- the launching process: mpirun, watched for death and stalls ----
struct RankStatus {
  int count = -1;      // schedule actions started
  long long at_ms = 0; // when the last one started (wall clock)
  int pid = 0;         // the rank's process (on this machine)
  std::string text;    // the last one, or "done"
  bool seen = false;
};

// A rank process stopped by a signal (SIGSTOP, a debugger): /proc/PID/stat state T or t.
bool process_stopped(int pid) {
  const char state = process_state(pid);
  return state == 'T' || state == 't';
}

RankStatus rank_status(const std::string& dir, int rank) {
  RankStatus s;
  std::string t = read_file(dir + "/rank-" + std::to_string(rank) + ".status");
  const auto sp = t.find(' ');
  if (t.empty() || sp == std::string::npos) return s;
  const auto sp2 = t.find(' ', sp + 1);
  const auto sp3 = sp2 == std::string::npos ? sp2 : t.find(' ', sp2 + 1);
  if (sp3 == std::string::npos) return s;
  s.seen = true;
  s.count = std::atoi(t.substr(0, sp).c_str());
  s.at_ms = std::atoll(t.substr(sp + 1, sp2 - sp - 1).c_str());
  s.pid = std::atoi(t.substr(sp2 + 1, sp3 - sp2 - 1).c_str());
  s.text = t.substr(sp3 + 1);
  while (!s.text.empty() && (s.text.back() == ' ' || s.text.back() == '\n')) s.text.pop_back();
  return s;
}

// The rank the others wait for, once no rank moves: a process stopped by a
// signal first; else, in each pipeline stage (ranks rank / per_stage, which
// run one schedule), the rank that started the fewest actions (its peers
// went on until a collective needed it, whatever their start-up skew: the
// launcher's clock order alone named the wrong rank of two under load); and
// of those, the one whose last action started earliest (a stopped rank's
// peers in other stages stall after it). -1 when no rank is running.
int furthest_behind(const std::vector<RankStatus>& st, int per_stage) {
  const int n = int(st.size());
  auto running = [&](int i) { return st[std::size_t(i)].seen && st[std::size_t(i)].text != "done"; };
  for (int i = 0; i < n; ++i)
    if (running(i) && process_stopped(st[std::size_t(i)].pid)) return i;
  int worst = -1;
  for (int first = 0; first < n; first += per_stage) {
    int lag = -1;  // this stage's rank furthest behind
    for (int i = first; i < std::min(n, first + per_stage); ++i) {
      if (!running(i)) continue;
      const RankStatus &s = st[std::size_t(i)];
      if (lag < 0 || s.count < st[std::size_t(lag)].count ||
          (s.count == st[std::size_t(lag)].count && s.at_ms < st[std::size_t(lag)].at_ms))
        lag = i;
    }
    if (lag < 0) continue;
    const RankStatus &s = st[std::size_t(lag)];
    if (worst < 0 || s.at_ms < st[std::size_t(worst)].at_ms ||
        (s.at_ms == st[std::size_t(worst)].at_ms && s.count < st[std::size_t(worst)].count))
      worst = lag;
  }
  return worst;
}

int launch(const Resolved& r, ValidateOptions& o, std::ostream& out) {
  if (!have_mpi())
    throw SpecError("--launcher", 0, "", "this paraplan was built without MPI; use --emulate-rank, or rebuild with libopenmpi-dev");
  const int n = r.layout.gpus();
  std::string tmpl = (fs::temp_directory_path() / "paraplan-validate-XXXXXX").string();  // honours TMPDIR
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary directory");
  const std::string dir = tmpl;
  remove_on_signal(dir);
  std::vector<std::string> args{"validate", o.spec, "--launcher", "none", "--result-dir", dir,
                           "--layout", to_string(r.layout), "--steps", std::to_string(o.steps), "--backend", o.backend,
                           "--lr", fmt::format("{}", o.lr), "--seed", std::to_string(o.seed),
                           "--tolerance", fmt::format("{:.17g}", o.tolerance)};
  if (o.memory_limit_gib) args.insert(args.end(), {"--memory-limit-gib", fmt::format("{:.17g}", *o.memory_limit_gib)});
  if (o.grad_check) args.push_back("--grad-check");
  if (o.debug_stall_rank) args.insert(args.end(), {"--debug-stall-rank", std::to_string(*o.debug_stall_rank)});
  if (o.debug_exit_rank) args.insert(args.end(), {"--debug-exit-rank", std::to_string(*o.debug_exit_rank)});
  const std::string log = dir + "/mpirun.log";
  const pid_t pid = start_mpirun(n, o.mpirun_args, std::move(args), log);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int> last_count(std::size_t(n), -2);
  std::vector<std::chrono::steady_clock::time_point> last_change(std::size_t(n), t0);
  int wstatus = 0;
  std::string failure;
  ProgressLine progress(fmt::format("validate {} on {} ranks", to_string(r.layout), n));
  for (;;) {
    const pid_t w = waitpid(pid, &wstatus, WNOHANG);
    if (w == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Progress is the count of schedule actions; when no rank has moved for
    // the stall timeout, the one furthest behind is the one the others wait for.
    const auto now = std::chrono::steady_clock::now();
    int step = -1, started = 0;  // the slowest rank's step, for the progress line
    std::vector<RankStatus> st(static_cast<std::size_t>(n));
    double idle = 1e300;
    for (int i = 0; i < n; ++i) {
      RankStatus& s = st[std::size_t(i)];
      s = rank_status(dir, i);
      if (s.seen) {
        ++started;
        const int k = s.text == "done" ? o.steps - 1 : progress_step(s.text);
        if (k >= 0) step = step < 0 ? k : std::min(step, k);
      }
      if (s.count != last_count[i]) last_count[i] = s.count, last_change[i] = now;
      if (!s.seen || s.text == "done") continue;
      idle = std::min(idle, std::chrono::duration<double>(now - last_change[i]).count());
    }
    const int worst = furthest_behind(st, r.layout.tp * r.layout.dp);
    const RankStatus worst_s = worst >= 0 ? st[std::size_t(worst)] : RankStatus{};
    progress.update(started < n || step < 0 ? fmt::format("starting ({} of {} ranks up)", started, n)
                                            : fmt::format("step {}/{}", step + 1, o.steps));
    std::string why;
    if (worst >= 0 && idle < 1e300 && idle > o.stall_timeout_s)
      why = fmt::format("rank {} stalled: no progress for {:.0f} s (last at: {})", worst, idle, worst_s.text);
    else if (elapsed > o.timeout_s)
      why = worst >= 0 ? fmt::format("timed out after {:.0f} s; rank {} was the furthest behind (last at: {})",
                                     elapsed, worst, worst_s.text)
                       : fmt::format("timed out after {:.0f} s before any rank started", elapsed);
    if (!why.empty()) {
      failure = why;
      stop_mpirun(pid, &wstatus);
      break;
    }
  }
  mpirun_ended();
  progress.finish();
  auto cleanup = [&] {
    remove_on_signal("");
    fs::remove_all(dir);
  };
  if (failure.empty() && fs::exists(dir + "/result.json")) {
    // Rank 0 wrote the comparison in both formats.
    const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/result.json"));
    const std::string text = o.format == "json" ? j.dump(2) + "\n" : read_file(dir + "/result.txt");
    cleanup();
    if (o.output.empty()) out << text;
    else write_output(o.output, text);
    return j.at("pass").get<bool>() ? 0 : 1;
  }
  // Failure: an out-of-memory report, a dead rank, or a stall.
  for (int i = 0; i < n && failure.empty(); ++i)
    if (fs::exists(dir + "/rank-" + std::to_string(i) + ".error")) failure = read_file(dir + "/rank-" + std::to_string(i) + ".error");
  const std::string mlog = read_file(log);
  if (failure.empty()) {
    std::smatch m;
    static const std::regex rank_re(R"(process rank (\d+)|\[\[\d+,\d+\],(\d+)\])");
    std::string who;
    if (std::regex_search(mlog, m, rank_re)) who = m[1].matched ? m[1].str() : m[2].str();
    if (!who.empty()) {
      const RankStatus s = rank_status(dir, std::stoi(who));
      failure = fmt::format("rank {} died (last at: {})", who, s.seen ? s.text : "start-up");
    } else {
      std::string last;
      std::istringstream in(mlog);
      for (std::string line; std::getline(in, line);)
        if (!line.empty() && line.find_first_not_of("- ") != std::string::npos) last = line;
      failure = "mpirun failed" + (last.empty() ? std::string() : ": " + last);
    }
  }
  cleanup();
  std::cerr << "paraplan: validate " << to_string(r.layout) << ": " << failure << "\n";
  return failure.find("out of memory") != std::string::npos ? 1 : 3;
}

}  // namespace

int run_validate(ValidateOptions& o, std::ostream& out) {
  Resolved r = resolve(o);
  if (o.emulate_rank) return run_emulated(r, o, out);
  if (o.launcher == "none") return run_worker(r, o, out);
  return launch(r, o, out);
}

}  // namespace paraplan
