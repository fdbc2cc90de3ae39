#include "planner/calibrate_cli.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "planner/launch.hpp"
#include "planner/progress.hpp"
#include "planner/spec_error.hpp"
#include "validate/backend.hpp"

namespace paraplan {

namespace fs = std::filesystem;
using namespace validate;

CLI::App* add_calibrate_command(CLI::App& app, CalibrateOptions* o) {
  CLI::App* c = app.add_subcommand(
      "calibrate", "measure GEMM, memory and collective speed on this machine and write a cluster spec for the time model");
  c->add_option("--output", o->output, "the cluster spec (YAML) to write")->required();
  c->add_option("--backend", o->backend, "cpu | gpu (default cpu)")->check(CLI::IsMember({"cpu", "gpu"}));
  c->add_option("--ranks", o->ranks, "MPI ranks for the collectives (default 2; 1: none; with --launcher none: the MPI world)")
      ->check(CLI::Range(1, 4096));
  c->add_flag("--quick", o->quick, "fewer shapes and sizes, shorter timings (seconds, for tests)");
  c->add_option("--launcher", o->launcher, "mpirun (start the ranks) | none (already under mpirun/srun)")
      ->check(CLI::IsMember({"mpirun", "none"}));
  c->add_option("--precision", o->precision, "training precision the numbers are for: bf16 (default) | fp32")
      ->check(CLI::IsMember({"bf16", "fp32"}));
  c->add_option("--memory-gib", o->memory_gib, "memory per rank (GPU) in GiB (default: MemTotal / ranks on the cpu backend)")
      ->check(CLI::PositiveNumber);
  c->add_option("--name", o->name, "the cluster's name (default calibrated-<host>)");
  c->add_option("--timeout", o->timeout_s, "seconds the whole run may take (default 600)")->check(CLI::PositiveNumber);
  c->add_option("--mpirun-args", o->mpirun_args, "extra arguments for mpirun, e.g. \"--hostfile hosts\"");
  c->add_option("--save-samples", o->save_samples,
                "also write what was measured (JSON) to this file, for --from-samples");
  c->add_option("--from-samples", o->from_samples,
                "fit the samples a --save-samples run wrote instead of measuring (backend, precision and ranks "
                "are the saved run's)");
  c->add_option("--result-dir", o->result_dir, "(internal) where rank 0 writes the samples")->group("");
  return c;
}

namespace {

// ---- the host ----

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

std::string utc_date() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// "model name" of /proc/cpuinfo, or "cpu".
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      std::string v = line.substr(line.find(':') + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v.empty() ? "cpu" : v;
    }
  return "cpu";
}

// MemTotal of /proc/meminfo in GiB, 0 when unreadable.
double mem_total_gib() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("MemTotal:", 0) == 0) return std::stod(line.substr(9)) * 1024.0 / double(1ll << 30);
  return 0;
}

int host_cores() { return std::max(1, int(std::thread::hardware_concurrency())); }

// ---- writing files ----

// Fails early (before minutes of measuring) when `path` cannot be written.
void check_writable(const std::string& path) {
  const std::string probe = path + ".paraplan-tmp";
  {
    std::ofstream f(probe, std::ios::trunc);
    if (!f) throw SpecError(path, 0, "--output", "cannot write file (does the folder exist?)");
  }
  std::remove(probe.c_str());
}


std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ---- measuring (one rank) ----

TimingOptions timing(bool quick) {
  return quick ? TimingOptions{1, 2, 0.003} : TimingOptions{2, 5, 0.02};
}

std::vector<std::int64_t> collective_sizes(bool quick) {
  return message_sizes(4 << 10, quick ? 1 << 20 : 64 << 20, 4);  // 4 KiB .. 1 or 64 MiB
}

using RankSamples = Samples;

// The GPU of this rank within its node: the launcher's local rank, else the rank.
int local_rank(int rank) {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const char* e = std::getenv(v)) return std::atoi(e);
  return rank;
}

// GEMMs (both dtypes), copies and the non-GEMM work (the precision's) on this rank.
// `world`: all ranks (null for one), so that they start each step case together.
// What is being measured, for the progress line: "[k/n] what".
using Phase = std::function<void(const std::string&)>;

RankSamples measure_compute(Backend b, Device& dev, MemoryResource& mem, DType precision, bool quick, const Phase& phase,
                            int phases, Communicator* world = nullptr,
                            const std::function<Groups(int, int)>& groups = {}) {
  RankSamples r;
  const std::vector<GemmCase> cases = gemm_cases(quick, b == Backend::kGpu);
  int k = 0;
  const auto say = [&](const std::string& what) {
    if (phase) phase(fmt::format("[{}/{}] {}", ++k, phases, what));
  };
  for (DType t : {DType::kBf16, DType::kFp32}) {
    say(fmt::format("{} GEMMs ({} shapes)", dtype_name(t), cases.size()));
    auto s = measure_gemms(dev, mem, cases, t, timing(quick));
    r.gemm.insert(r.gemm.end(), s.begin(), s.end());
  }
  say("memory copies");
  r.copies = measure_copies(dev, mem, copy_sizes(quick), precision, timing(quick));
  say("memory-bound kernels");
  r.work = measure_work(dev, mem, work_cases(quick), precision, timing(quick));
  say("training steps");
  r.steps = measure_steps(dev, mem, step_cases(quick), precision, timing(quick), world, groups);
  return r;
}
constexpr int kComputePhases = 5;  // bf16 GEMMs, fp32 GEMMs, copies, kernels, steps

RankSamples measure_compute(Backend b, DType precision, bool quick) {
  auto dev = make_device(b, 0);
  auto mem = make_memory(b, 0);
  ProgressLine progress("calibrate");
  RankSamples r = measure_compute(b, *dev, *mem, precision, quick, [&](const std::string& p) { progress.update(p); },
                                  kComputePhases);
  progress.finish();
  return r;
}

// Collectives over groups of every size g (2 ≤ g ≤ min(world, 8), g dividing
// the world), all groups of one size at once; rank 0's group is reported.
std::vector<CollectiveSample> measure_comm(Backend b, Device& dev, MemoryResource& mem, int rank, int world,
                                           DType precision, bool quick, const Phase& phase = {}) {
  std::vector<CollectiveSample> out;
  for (int g = 2; g <= std::min(world, 8); ++g) {
    if (world % g) continue;
    if (phase) phase(fmt::format("[{}/{}] collectives in groups of {}", kComputePhases + 1, kComputePhases + 1, g));
    Groups groups = make_groups(b, rank, g, world / g, 1, false);
    for (bool in_step : {false, true}) {
      auto s = measure_collectives(*groups.tp, dev, mem,
                                   {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter},
                                   collective_sizes(quick), precision, timing(quick), in_step);
      out.insert(out.end(), s.begin(), s.end());
    }
  }
  return out;
}

// Each sample's time: the mean over ranks (they measured at once).
RankSamples mean_over_ranks(const std::vector<RankSamples>& all) {
  RankSamples r = all.at(0);
  for (std::size_t i = 0; i < r.gemm.size(); ++i) {
    double sum = 0;
    for (const RankSamples& x : all) sum += x.gemm.at(i).seconds;
    r.gemm[i].seconds = sum / double(all.size());
  }
  for (std::size_t i = 0; i < r.copies.size(); ++i) {
    double sum = 0;
    for (const RankSamples& x : all) sum += x.copies.at(i).seconds;
    r.copies[i].seconds = sum / double(all.size());
  }
  for (std::size_t i = 0; i < r.work.size(); ++i) {
    r.work[i].seconds = 0;
    for (std::size_t p = 0; p < r.work[i].parts.size(); ++p) {
      double sum = 0;
      for (const RankSamples& x : all) sum += x.work.at(i).parts.at(p).second;
      r.work[i].parts[p].second = sum / double(all.size());
      r.work[i].seconds += r.work[i].parts[p].second;
    }
  }
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    double sum = 0;
    for (const RankSamples& x : all) sum += x.steps.at(i).seconds;
    r.steps[i].seconds = sum / double(all.size());
  }
  return r;  // collectives: already averaged over each group's ranks
}

Calibration new_calibration(const CalibrateOptions& o, int ranks, bool mpi) {
  Calibration c;
  c.backend = o.backend;
  c.host = host_name();
  c.date = utc_date();
  c.precision = o.precision == "fp32" ? DType::kFp32 : DType::kBf16;
  c.ranks = ranks;
  c.cores = host_cores();
  c.mpi = mpi;
  c.device_name = o.backend == "cpu" ? cpu_model() : "gpu";
  if (o.memory_gib) {
    c.memory_gib = *o.memory_gib, c.memory_source = "--memory-gib";
  } else if (o.backend == "cpu") {
    c.memory_gib = mem_total_gib() / ranks;
    c.memory_source = fmt::format("MemTotal of /proc/meminfo / {} rank(s): the ranks share the host's memory", ranks);
  }
  return c;
}

void add_samples(Calibration* c, RankSamples s) { c->samples = std::move(s); }

// ---- samples files (--save-samples, --from-samples) ----

constexpr const char* kSamplesFormat = "paraplan calibrate samples 1";

void save_samples(const std::string& path, const Calibration& c) {
  const nlohmann::json j = {{"format", kSamplesFormat}, {"backend", c.backend},
                            {"precision", dtype_name(c.precision)}, {"ranks", c.ranks},
                            {"cores", c.cores}, {"mpi", c.mpi}, {"host", c.host}, {"date", c.date},
                            {"device", c.device_name}, {"memory_gib", c.memory_gib},
                            {"memory_source", c.memory_source}, {"samples", samples_json(c.samples)}};
  write_output(path, j.dump(1) + "\n");
}

Calibration load_samples(const std::string& path) {
  if (!fs::exists(path)) throw SpecError(path, 0, "--from-samples", "no such file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception&) {
    throw SpecError(path, 0, "--from-samples", "not JSON; expected the file a --save-samples run wrote");
  }
  if (!j.is_object() || j.value("format", std::string()) != kSamplesFormat)
    throw SpecError(path, 0, "format", std::string("expected \"") + kSamplesFormat + "\" (a --save-samples file)");
  Calibration c;
  try {
    c.backend = j.at("backend");
    c.precision = j.at("precision") == "fp32" ? DType::kFp32 : DType::kBf16;
    c.ranks = j.at("ranks");
    c.cores = j.at("cores");
    c.mpi = j.at("mpi");
    c.host = j.at("host");
    c.date = j.at("date");
    c.device_name = j.at("device");
    c.memory_gib = j.at("memory_gib");
    c.memory_source = j.at("memory_source");
    c.samples = samples_from_json(j.at("samples"));
  } catch (const nlohmann::json::exception& e) {
    throw SpecError(path, 0, "samples", std::string("malformed: ") + e.what());
  }
  if (c.ranks < 1) throw SpecError(path, 0, "ranks", "expected a positive count");
  return c;
}

int finish(CalibrateOptions& o, Calibration& c, std::ostream& out) {
  fit_calibration(&c);
  const std::string name = o.name.empty() ? "calibrated-" + c.host : o.name;
  out << render_calibration(c);
  write_output(o.output, calibrated_cluster_yaml(c, name));
  out << "wrote " << o.output << "\n";
  return 0;
}

// ---- one rank under mpirun (or srun) ----
int run_worker(CalibrateOptions& o, Backend b, std::ostream& out) {
  int rank = 0, world = 1;
  mpi_init(&rank, &world);
  const DType precision = o.precision == "fp32" ? DType::kFp32 : DType::kBf16;
  RankSamples mine;
  try {
    if (rank == 0 && o.result_dir.empty()) {
      check_writable(o.output);
      if (!o.save_samples.empty()) check_writable(o.save_samples);
    }
  } catch (const SpecError& e) {
    std::cerr << "paraplan: error: " << e.one_line() << "\n";
    mpi_abort(2);
  }
  try {
    auto dev = make_device(b, local_rank(rank));
    auto mem = make_memory(b, local_rank(rank));
    Groups all = make_groups(b, rank, 1, world, 1, false);
    // Rank 0 says what it measures in the result folder; the launcher shows it.
    const Phase phase = [&](const std::string& p) {
      if (rank == 0 && !o.result_dir.empty()) std::ofstream(o.result_dir + "/progress") << p;
    };
    mine = measure_compute(b, *dev, *mem, precision, o.quick, phase, kComputePhases + (world > 1), all.world.get(),
                           [&](int tp, int dp) { return make_groups(b, rank, tp, dp, 1, false); });
    mine.collectives = measure_comm(b, *dev, *mem, rank, world, precision, o.quick, phase);
  } catch (const std::exception& e) {
    // The other ranks would wait forever in their next collective: stop them all.
    std::cerr << "paraplan: error: calibrate rank " << rank << ": " << e.what() << "\n";
    mpi_abort(2);
  }
  const std::vector<std::string> all = mpi_gather_strings(samples_json(mine).dump());
  int code = 0;
  if (rank == 0) {
    std::vector<RankSamples> ranks;
    for (const std::string& s : all) ranks.push_back(samples_from_json(nlohmann::json::parse(s)));
    const RankSamples mean = mean_over_ranks(ranks);
    if (!o.result_dir.empty()) {
      write_output(o.result_dir + "/samples.json", samples_json(mean).dump());
    } else {
      Calibration c = new_calibration(o, world, true);
      add_samples(&c, mean);
      if (!o.save_samples.empty()) save_samples(o.save_samples, c);
      code = finish(o, c, out);
    }
  }
  mpi_finalize();
  return code;
}

// ---- the launching process ----

// Runs `mpirun -np ranks paraplan calibrate --launcher none ...` and returns
// rank 0's samples; throws with the last line of mpirun's output on failure.
RankSamples launch(const CalibrateOptions& o) {
  char tmpl[] = "/tmp/paraplan-calibrate-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("cannot create a temporary directory");
  const std::string dir = tmpl;
  std::vector<std::string> args{"calibrate", "--launcher", "none", "--result-dir", dir, "--output", o.output,
                           "--backend", o.backend, "--precision", o.precision, "--ranks", std::to_string(o.ranks)};
  if (o.quick) args.push_back("--quick");
  const std::string log = dir + "/mpirun.log";
  const pid_t pid = start_mpirun(o.ranks, o.mpirun_args, std::move(args), log);
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  bool timed_out = false;
  ProgressLine progress(fmt::format("calibrate on {} ranks", o.ranks));
  while (waitpid(pid, &status, WNOHANG) != pid) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (progress.enabled()) {
      const std::string p = read_file(dir + "/progress");
      progress.update(p.empty() ? "starting" : p);
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > o.timeout_s) {
      stop_mpirun(pid, &status);
      timed_out = true;
      break;
    }
  }
  mpirun_ended();
  progress.finish();
  const fs::path result = fs::path(dir) / "samples.json";
  RankSamples r;
  std::string failure;
  if (timed_out) {
    failure = fmt::format("timed out after {:.0f} s", o.timeout_s);
  } else if (!fs::exists(result)) {
    std::string last;
    std::istringstream in(read_file(log));
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line.find_first_not_of("- ") != std::string::npos) last = line;
    failure = "mpirun failed" + (last.empty() ? std::string() : ": " + last);
  } else {
    r = samples_from_json(nlohmann::json::parse(read_file(result)));
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!failure.empty()) throw std::runtime_error("calibrate: " + failure);
  return r;
}

}  // namespace

int run_calibrate(CalibrateOptions& o, std::ostream& out) {
  if (!o.from_samples.empty()) {
    Calibration c = load_samples(o.from_samples);
    check_writable(o.output);
    return finish(o, c, out);
  }
  Backend b;
  if (!parse_backend(o.backend, &b)) throw SpecError("--backend", 0, "", "expected cpu or gpu");
  if (!backend_available(b))
    throw SpecError("--backend", 0, "", "this paraplan was built without CUDA; available: cpu");
  if (b == Backend::kGpu && !o.memory_gib)
    throw SpecError("--memory-gib", 0, "", "--backend gpu needs --memory-gib (the GPU's memory in GiB)");
  if (o.launcher == "none" && have_mpi()) return run_worker(o, b, out);
  check_writable(o.output);
  if (!o.save_samples.empty()) check_writable(o.save_samples);
  const bool mpi = have_mpi() && o.ranks > 1;
  if (!have_mpi() && o.ranks > 1)
    out << "note: this paraplan was built without MPI: measuring GEMMs and memory only; the link numbers "
           "are not measured\n";
  RankSamples s = mpi ? launch(o) : measure_compute(b, o.precision == "fp32" ? DType::kFp32 : DType::kBf16, o.quick);
  Calibration c = new_calibration(o, mpi ? o.ranks : 1, mpi);
  add_samples(&c, std::move(s));
  if (!o.save_samples.empty()) save_samples(o.save_samples, c);
  return finish(o, c, out);
}

// ---- samples as JSON (from the ranks to the launching process) ----

namespace {
DType dtype_of(const std::string& s) { return s == "fp32" ? DType::kFp32 : s == "fp16" ? DType::kFp16 : DType::kBf16; }
}  // namespace

nlohmann::json samples_json(const Samples& s) {
  nlohmann::json j;
  j["gemm"] = nlohmann::json::array();
  for (const GemmSample& x : s.gemm)
    j["gemm"].push_back({{"name", x.shape.name}, {"m", x.shape.m}, {"n", x.shape.n}, {"k", x.shape.k},
                         {"ta", x.shape.trans_a}, {"tb", x.shape.trans_b}, {"acc", x.shape.accumulate},
                         {"dtype", dtype_name(x.dtype)}, {"seconds", x.seconds}});
  j["copies"] = nlohmann::json::array();
  for (const CopySample& x : s.copies)
    j["copies"].push_back({{"elements", x.elements}, {"dtype", dtype_name(x.dtype)}, {"seconds", x.seconds}});
  j["work"] = nlohmann::json::array();
  for (const WorkSample& x : s.work)
    j["work"].push_back({{"kind", int(x.what.kind)}, {"model", x.what.model}, {"seq", x.what.seq},
                         {"dtype", dtype_name(x.dtype)}, {"seconds", x.seconds}, {"parts", x.parts}});
  j["steps"] = nlohmann::json::array();
  for (const StepSample& x : s.steps)
    j["steps"].push_back({{"model", x.what.model}, {"seq", x.what.seq}, {"batch", x.what.batch},
                          {"tp", x.what.tp}, {"sp", x.what.sp}, {"zero", x.what.zero},
                          {"ranks", x.ranks}, {"dtype", dtype_name(x.dtype)}, {"seconds", x.seconds}});
  j["collectives"] = nlohmann::json::array();
  for (const CollectiveSample& x : s.collectives)
    j["collectives"].push_back({{"kind", int(x.kind)}, {"n", x.group_size}, {"dtype", dtype_name(x.dtype)},
                                {"bytes", x.bytes}, {"seconds", x.seconds}, {"in_step", x.in_step}});
  return j;
}

Samples samples_from_json(const nlohmann::json& j) {
  Samples s;
  for (const auto& x : j.at("gemm")) {
    GemmSample g;
    g.shape = GemmCase{x.at("name"), x.at("m"), x.at("n"), x.at("k"), x.at("ta"), x.at("tb"), x.at("acc")};
    g.dtype = dtype_of(x.at("dtype"));
    g.seconds = x.at("seconds");
    s.gemm.push_back(g);
  }
  for (const auto& x : j.at("copies")) s.copies.push_back({x.at("elements"), dtype_of(x.at("dtype")), x.at("seconds")});
  for (const auto& x : j.at("work")) {
    WorkSample w;
    w.what = WorkCase{WorkKind(x.at("kind").get<int>()), x.at("model"), x.at("seq")};
    w.dtype = dtype_of(x.at("dtype"));
    w.seconds = x.at("seconds");
    w.parts = x.at("parts").get<std::vector<std::pair<std::string, double>>>();
    s.work.push_back(w);
  }
  if (j.contains("steps"))
    for (const auto& x : j.at("steps")) {
      StepSample t;
      t.what = StepCase{x.at("model"), x.at("seq"), x.at("batch"), x.value("tp", 1), x.value("sp", false),
                        x.value("zero", 0)};
      t.dtype = dtype_of(x.at("dtype"));
      t.seconds = x.at("seconds");
      t.ranks = x.value("ranks", 1);
      s.steps.push_back(t);
    }
  for (const auto& x : j.at("collectives")) {
    CollectiveSample c;
    c.kind = Collective(x.at("kind").get<int>());
    c.group_size = x.at("n");
    c.dtype = dtype_of(x.at("dtype"));
    c.bytes = x.at("bytes");
    c.seconds = x.at("seconds");
    c.in_step = x.value("in_step", false);
    s.collectives.push_back(c);
  }
  return s;
}

// ---- fits, cluster, YAML, report ----

namespace {

// The cluster the kernel-level fits and the link fit describe (before the step
// refit): what the step fit starts from, and the report's "kernel fits" column.
// Without measured collectives the host's copy rate and 1 µs stand in.
Cluster kernel_fit_cluster(const Calibration& c) {
  Cluster k;
  k.gpu.peak_tflops_bf16 = c.gemm_fit.peak_flops / 1e12;
  k.gpu.hbm_bandwidth_gbs = c.memory_fit.bandwidth / 1e9;
  k.gemm_efficiency = c.gemm_fit.efficiency;
  k.gemm_fixed_us = c.gemm_fit.fixed_s * 1e6;
  k.hbm_efficiency = c.hbm_efficiency_used();
  k.optimizer_efficiency = c.memory_fit.optimizer_efficiency;  // 0 (no Adam samples): hbm_efficiency
  const bool measured = c.mpi && c.link_fit.bytes_per_s > 0;
  k.intra_node.bandwidth_gbs = measured ? c.link_fit.bytes_per_s / 1e9 : c.memory_fit.bandwidth / 1e9;
  k.intra_node.latency_us = measured ? c.link_fit.alpha_s * 1e6 : 1.0;
  k.inter_node = k.intra_node;
  k.intra_comm_efficiency = k.inter_comm_efficiency = 1.0;
  return k;
}

}  // namespace

double Calibration::hbm_efficiency_used() const {
  return memory_fit_rejected ? Cluster{}.hbm_efficiency : memory_fit.efficiency;
}

void fit_calibration(Calibration* c) {
  Samples& s = c->samples;
  std::vector<GemmSample> mine, other;
  for (const GemmSample& g : s.gemm) (g.dtype == c->precision ? mine : other).push_back(g);
  // The GEMM fit's roofline needs the memory rate and the work fit's attention
  // core the GEMM rate: fit one after the other, twice (CPU GEMMs are compute-
  // bound, so the second round changes little). The memory rate is the best
  // copy's at the hbm_efficiency used: a rejected work fit (below
  // kMinHbmEfficiency) would price every GEMM as memory-bound.
  double membw = 0;
  for (const CopySample& x : s.copies) membw = std::max(membw, x.bytes_per_s());
  for (int round = 0; round < 2; ++round) {
    c->gemm_fit = fit_gemm(mine, 0, membw);
    Cluster base;
    base.gpu.peak_tflops_bf16 = c->gemm_fit.peak_flops / 1e12;
    base.gemm_efficiency = c->gemm_fit.efficiency;
    c->memory_fit = fit_memory(s.copies, s.work, base);
    c->memory_fit_rejected = c->memory_fit.samples > 0 && c->memory_fit.efficiency < kMinHbmEfficiency;
    membw = c->memory_fit.bandwidth * c->hbm_efficiency_used();
  }
  if (c->mpi && !s.collectives.empty()) c->link_fit = fit_link(s.collectives);
  // Last, the kernel fits' efficiencies refitted to whole training steps (on
  // the fitted link: data-parallel steps include their gradient all-reduce).
  c->step_fit = fit_steps(s.steps, kernel_fit_cluster(*c));
  c->step_fit_rejected = c->step_fit.samples >= 2 && c->step_fit.hbm_efficiency < kMinHbmEfficiency;
  if (!other.empty()) c->other_gemm_fit = fit_gemm(other, 0, membw);
  s.gemm = mine;
  s.gemm.insert(s.gemm.end(), other.begin(), other.end());
}

Cluster calibrated_cluster(const Calibration& c, const std::string& name) {
  Cluster k = kernel_fit_cluster(c);  // the link stand-ins are said in the YAML
  k.name = name;
  k.source = fmt::format("measured by paraplan calibrate on {}, {}", c.host, c.date);
  k.gpu.name = c.device_name;
  k.gpu.memory_gib = c.memory_gib;
  k.gpus_per_node = c.ranks;
  k.runtime_overhead_gib = 0;
  k.fragmentation = 0;
  const bool steps = c.step_fit.samples >= 2 && !c.step_fit_rejected;
  k.gemm_efficiency = steps ? c.step_fit.gemm_efficiency : c.gemm_fit.efficiency;
  k.hbm_efficiency = steps ? c.step_fit.hbm_efficiency : c.hbm_efficiency_used();
  k.attention_efficiency = steps && c.step_fit.samples >= 3 ? c.step_fit.attention_efficiency : 0;
  if (steps && c.step_fit.latency_fitted) k.intra_node.latency_us = k.inter_node.latency_us = c.step_fit.latency_s * 1e6;
  return k;
}

namespace {

// A double-quoted YAML scalar.
std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') q += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) q += ch;
  }
  return q + "\"";
}

std::string num(double v) { return fmt::format("{:.6g}", v); }

std::string size_text(double bytes) {
  if (bytes >= double(1 << 20)) return fmt::format("{:g} MiB", bytes / double(1 << 20));
  if (bytes >= 1024) return fmt::format("{:g} KiB", bytes / 1024);
  return fmt::format("{:g} B", bytes);
}

int distinct_group_sizes(const std::vector<CollectiveSample>& v) {
  std::map<int, int> m;
  for (const CollectiveSample& s : v) ++m[s.group_size];
  return int(m.size());
}

}  // namespace

std::string calibrated_cluster_yaml(const Calibration& c, const std::string& name) {
  const Cluster k = calibrated_cluster(c, name);
  const char* prec = dtype_name(c.precision);
  std::string y;
  y += "# Cluster spec written by `paraplan calibrate` (docs/calibration.md): the time\n";
  y += fmt::format("# model's numbers fitted to {} {} training on the {} backend, {} rank(s) on {} core(s).\n",
                   prec, c.precision == DType::kFp32 ? "(fp32 GEMMs and kernels)" : "(bf16 GEMMs and kernels)",
                   c.backend, c.ranks, c.cores);
  if (c.oversubscribed())
    y += "# OVERSUBSCRIBED: more ranks than cores; the collective timings are not meaningful.\n";
  y += fmt::format("name: {}\n", quoted(k.name));
  y += fmt::format("source: {}\n", quoted(k.source));
  y += "gpu:\n";
  y += fmt::format("  name: {}\n", quoted(k.gpu.name));
  y += fmt::format("  # {}\n", c.memory_source);
  y += fmt::format("  memory_gib: {}\n", num(k.gpu.memory_gib));
  y += fmt::format("  # the best {} Device::gemm rate measured over {} GEMM shapes; the time model uses this\n"
                   "  # key for the training precision's GEMMs (calibrate with --precision fp32 for fp32)\n",
                   prec, c.gemm_fit.samples);
  y += fmt::format("  peak_tflops_bf16: {}\n", num(k.gpu.peak_tflops_bf16));
  y += "  # copy of large buffers (beyond the last-level cache): bytes read + written / time\n";
  y += fmt::format("  hbm_bandwidth_gbs: {}\n", num(k.gpu.hbm_bandwidth_gbs));
  y += fmt::format("# the ranks calibrated, one \"GPU\" each\ngpus_per_node: {}\n", k.gpus_per_node);
  y += "intra_node:\n";
  if (c.mpi) {
    double lo = 0, hi = 0;
    for (const CollectiveSample& s : c.samples.collectives)
      lo = lo > 0 ? std::min(lo, double(s.bytes)) : double(s.bytes), hi = std::max(hi, double(s.bytes));
    y += fmt::format("  # α-β least-squares fit of the ring formulas (costmodel/comm.cpp) to MPI all-reduce,\n"
                     "  # all-gather and reduce-scatter of {} .. {} {} ({} samples, {} group size(s)), each\n"
                     "  # timed as in a training step (right after compute, the wait for the slower rank\n"
                     "  # included): β per rank\n",
                     size_text(lo), size_text(hi), prec, c.link_fit.samples, distinct_group_sizes(c.samples.collectives));
  } else {
    y += "  # NOT MEASURED (one rank, or no MPI in this build): the copy rate stands in\n";
  }
  y += fmt::format("  bandwidth_gbs: {}\n", num(k.intra_node.bandwidth_gbs));
  if (c.step_fit.latency_fitted)
    y += fmt::format("  # α: latency per algorithm step, refitted to the training steps with many collectives\n"
                     "  # (tp + sp, ZeRO 2), where each also waits for the slower rank (the collective fit\n"
                     "  # above: {} µs)\n",
                     num(c.link_fit.alpha_s * 1e6));
  else
    y += fmt::format("  # {}\n", c.mpi ? "α: latency per algorithm step of the same fit" : "NOT MEASURED: 1 µs stands in");
  y += fmt::format("  latency_us: {}\n", num(k.intra_node.latency_us));
  y += "  # the bandwidth above is already the achieved one\n  efficiency: 1\n";
  y += "inter_node:\n  # NOT MEASURED (one host): the intra-node numbers\n";
  y += fmt::format("  bandwidth_gbs: {}\n  latency_us: {}\n  efficiency: 1\n", num(k.inter_node.bandwidth_gbs),
                   num(k.inter_node.latency_us));
  const bool cpu = c.backend == "cpu";
  y += fmt::format("# {}\nruntime_overhead_gib: 0\n",
                   cpu ? "no CUDA context, cuBLAS workspace or NCCL buffers on the CPU" : "not measured by calibrate");
  y += fmt::format("# {}\nfragmentation: 0\n", cpu ? "host memory is tracked exactly" : "not measured by calibrate");
  y += fmt::format("# least-squares fit of gemm_time (costmodel/time.cpp) to the {} GEMMs: {} (RMS error {:.1f}%)\n",
                   c.gemm_fit.samples, num(c.gemm_fit.efficiency), 100 * c.gemm_fit.rms_rel_error);
  y += fmt::format("# least-squares fit of the model's non-GEMM time (memory-bound terms, attention core) to\n"
                   "# the executor's kernels of whole micro-batches (layers, embedding, output; {} of them): {} (RMS error {:.1f}%)\n",
                   c.memory_fit.samples, num(c.memory_fit.efficiency), 100 * c.memory_fit.rms_rel_error);
  if (c.memory_fit_rejected)
    y += fmt::format("# NOT USED: below {} of the copy rate the executor's kernels are not memory-bound (reference-grade\n"
                     "# kernels); hbm_efficiency is the default {} of the measured copy rate\n",
                     num(kMinHbmEfficiency), num(Cluster{}.hbm_efficiency));
  if (c.step_fit_rejected)
    y += fmt::format("# the refit to {} whole training steps gave hbm_efficiency {}, below {}: not used\n",
                     c.step_fit.samples, num(c.step_fit.hbm_efficiency), num(kMinHbmEfficiency));
  else if (c.step_fit.samples >= 2)
    y += fmt::format("# both refitted, with attention_efficiency, to the executor's whole training steps over the\n"
                     "# calibrated ranks (data-parallel, tp + sp, ZeRO 2; {} of them): RMS error of the step time\n"
                     "# {:.1f}% with the kernel fits, {:.1f}% with these\n",
                     c.step_fit.samples, 100 * c.step_fit.rms_rel_error_before, 100 * c.step_fit.rms_rel_error);
  y += fmt::format("gemm_efficiency: {}\n", num(k.gemm_efficiency));
  if (k.gemm_fixed_us > 0)
    y += fmt::format("# the fixed time per GEMM kernel, from the same GEMM fit\ngemm_fixed_us: {}\n", num(k.gemm_fixed_us));
  y += fmt::format("hbm_efficiency: {}\n", num(k.hbm_efficiency));
  if (k.attention_efficiency > 0)
    y += fmt::format("# the attention core's matrix products (flash or not), from the same step fit\n"
                     "attention_efficiency: {}\n", num(k.attention_efficiency));
  if (k.optimizer_efficiency > 0)
    y += fmt::format("# the optimizer step (one streaming pass): least-squares fit of the model's optimizer term\n"
                     "# to the executor's Adam step over all parameters ({} models; RMS error {:.1f}%)\n"
                     "optimizer_efficiency: {}\n",
                     c.memory_fit.optimizer_samples, 100 * c.memory_fit.optimizer_rms_rel_error,
                     num(k.optimizer_efficiency));
  return y;
}

std::string render_calibration(const Calibration& c) {
  std::string o = fmt::format("paraplan calibrate: {} backend ({}), {} rank(s) on {} core(s), {} numbers\n",
                              c.backend, c.device_name, c.ranks, c.cores, dtype_name(c.precision));
  auto err = [](double fitted, double measured) {
    return measured > 0 ? fmt::format("{:+.1f}%", 100 * (fitted - measured) / measured) : std::string("-");
  };
  for (DType t : {c.precision, c.precision == DType::kFp32 ? DType::kBf16 : DType::kFp32}) {
    const GemmFit& f = t == c.precision ? c.gemm_fit : c.other_gemm_fit;
    o += fmt::format("\nGEMM {} (Device::gemm; error = fitted vs measured)\n", dtype_name(t));
    o += fmt::format("  {:<32}{:>6}{:>6}{:>6}{:>5}{:>12}{:>10}{:>12}{:>9}\n", "case", "m", "n", "k", "op", "measured",
                     "GFLOP/s", "fitted", "error");
    for (const GemmSample& s : c.samples.gemm) {
      if (s.dtype != t) continue;
      const GemmCase& g = s.shape;
      const std::string op = std::string(g.trans_a ? "T" : "N") + (g.trans_b ? "T" : "N") + (g.accumulate ? "+" : "");
      o += fmt::format("  {:<32}{:>6}{:>6}{:>6}{:>5}{:>9.3f} ms{:>10.2f}{:>9.3f} ms{:>9}\n", g.name, g.m, g.n, g.k, op,
                       1e3 * s.seconds, s.flops_per_s() / 1e9, 1e3 * s.fitted_s, err(s.fitted_s, s.seconds));
    }
    o += fmt::format("  fit: peak {:.2f} GFLOP/s (best measured), gemm_efficiency {:.4f} -> {:.2f} GFLOP/s, "
                     "{:.2f} us per GEMM; RMS error {:.1f}% over {} samples{}\n",
                     f.peak_flops / 1e9, f.efficiency, f.peak_flops * f.efficiency / 1e9, f.fixed_s * 1e6,
                     100 * f.rms_rel_error, f.samples, t == c.precision ? "" : " (reported, not written)");
  }
  o += fmt::format("\ncopies {} (Device::copy; bytes read + written)\n", dtype_name(c.precision));
  for (const CopySample& s : c.samples.copies)
    o += fmt::format("  {:>12} elements {:>10.3f} ms {:>9.2f} GB/s\n", s.elements, 1e3 * s.seconds, s.bytes_per_s() / 1e9);
  o += fmt::format("\nwork outside the GEMMs {} (the executor's kernels vs the model's memory-bound and attention "
                   "terms)\n", dtype_name(c.precision));
  o += fmt::format("  {:<18}{:<13}{:>5}{:>12}{:>12}{:>9}  {}\n", "work", "model", "seq", "measured", "fitted", "error",
                   "where the time goes");
  for (const WorkSample& s : c.samples.work) {
    std::string parts;
    for (const auto& [name, t] : s.parts)
      parts += fmt::format("{}{} {:.0f}%", parts.empty() ? "" : ", ", name, s.seconds > 0 ? 100 * t / s.seconds : 0);
    o += fmt::format("  {:<18}{:<13}{:>5}{:>9.3f} ms{:>9.3f} ms{:>9}  {}\n", work_kind_name(s.what.kind), s.what.model,
                     s.what.seq, 1e3 * s.seconds, 1e3 * s.fitted_s, err(s.fitted_s, s.seconds), parts);
  }
  o += fmt::format("  fit: hbm_bandwidth {:.2f} GB/s (best copy), hbm_efficiency {:.4f} -> {:.3f} GB/s; RMS error "
                   "{:.1f}% over {} micro-batches (layers + embedding/output)\n",
                   c.memory_fit.bandwidth / 1e9, c.memory_fit.efficiency,
                   c.memory_fit.bandwidth * c.memory_fit.efficiency / 1e9, 100 * c.memory_fit.rms_rel_error,
                   c.memory_fit.samples);
  if (c.memory_fit_rejected)
    o += fmt::format("  not used: below {:.2f} of the copy rate this work is not memory-bound (the executor's reference-grade\n"
                     "  kernels); the GEMM roofline and the cluster take hbm_efficiency {:.2f} of the best copy\n",
                     kMinHbmEfficiency, Cluster{}.hbm_efficiency);
  if (c.memory_fit.optimizer_samples > 0)
    o += fmt::format("  fit: optimizer_efficiency {:.4f} -> {:.3f} GB/s; RMS error {:.1f}% over {} Adam steps\n",
                     c.memory_fit.optimizer_efficiency,
                     c.memory_fit.bandwidth * c.memory_fit.optimizer_efficiency / 1e9,
                     100 * c.memory_fit.optimizer_rms_rel_error, c.memory_fit.optimizer_samples);
  o += fmt::format("\ntraining steps {} (the executor's steps over the {} rank(s): dp = ranks / tp, each data-parallel\n"
                   "  rank `batch` sequences, collectives included; against the model's step time)\n",
                   dtype_name(c.precision), c.samples.steps.empty() ? 1 : c.samples.steps.front().ranks);
  o += fmt::format("  {:<13}{:<11}{:>5}{:>7}{:>12}{:>14}{:>9}{:>12}{:>9}\n", "model", "layout", "seq", "batch",
                   "measured", "kernel fits", "error", "step fit", "error");
  {
    const Cluster kernel = kernel_fit_cluster(c);
    for (const StepSample& s : c.samples.steps) {
      const double before = model_step_time(s, kernel);
      o += fmt::format("  {:<13}{:<11}{:>5}{:>7}{:>9.2f} ms{:>11.2f} ms{:>9}{:>9.2f} ms{:>9}\n", s.what.model,
                       step_layout_label(s.what), s.what.seq, s.what.batch, 1e3 * s.seconds, 1e3 * before, err(before, s.seconds), 1e3 * s.fitted_s,
                       err(s.fitted_s, s.seconds));
    }
  }
  o += fmt::format("  fit: gemm_efficiency {:.4f} (kernels: {:.4f}), hbm_efficiency {:.4f} (kernels: {:.4f}), "
                   "attention_efficiency {:.4f}{}; RMS error {:.1f}% (kernel fits: {:.1f}%) over {} steps; {}\n",
                   c.step_fit.gemm_efficiency, c.gemm_fit.efficiency, c.step_fit.hbm_efficiency,
                   c.memory_fit.efficiency, c.step_fit.attention_efficiency,
                   c.step_fit.latency_fitted
                       ? fmt::format(", link latency {:.2f} us per step (collectives: {:.2f})",
                                     c.step_fit.latency_s * 1e6, c.link_fit.alpha_s * 1e6)
                       : std::string(),
                   100 * c.step_fit.rms_rel_error, 100 * c.step_fit.rms_rel_error_before, c.step_fit.samples,
                   c.step_fit_rejected ? fmt::format("NOT written (hbm_efficiency below {:.2f}: not memory-bound work); "
                                                     "the kernel fits are", kMinHbmEfficiency)
                                       : std::string("these are written"));
  if (!c.mpi) {
    o += "\ncollectives: not measured (one rank, or no MPI in this build)\n";
    return o;
  }
  o += fmt::format("\ncollectives {} (MPI; busBw = algBw x 2(n-1)/n all-reduce, x (n-1)/n all-gather and "
                   "reduce-scatter, as nccl-tests)\n",
                   dtype_name(c.precision));
  if (c.oversubscribed())
    o += fmt::format("  OVERSUBSCRIBED: {} ranks on {} cores; these timings are not meaningful\n", c.ranks, c.cores);
  o += "  timed back to back (as nccl-tests), then in step: each right after a GEMM that writes its input,\n"
       "  timed alone (the wait for the slower rank and cold caches included); the fit uses the in-step ones\n";
  o += fmt::format("  {:<15}{:<9}{:>4}{:>10}{:>13}{:>12}{:>12}{:>13}{:>9}\n", "collective", "timing", "n", "size",
                   "measured", "algBw GB/s", "busBw GB/s", "fitted", "error");
  for (const CollectiveSample& s : c.samples.collectives)
    o += fmt::format("  {:<15}{:<9}{:>4}{:>10}{:>10.1f} us{:>12.3f}{:>12.3f}{:>10.1f} us{:>9}\n",
                     collective_label(s.kind), s.in_step ? "in step" : "b2b", s.group_size,
                     size_text(double(s.bytes)), 1e6 * s.seconds, s.alg_bw() / 1e9, s.bus_bw() / 1e9,
                     1e6 * s.fitted_s, err(s.fitted_s, s.seconds));
  o += fmt::format("  fit: latency {:.2f} us per step, bandwidth {:.3f} GB/s; RMS error {:.1f}% over {} samples\n",
                   c.link_fit.alpha_s * 1e6, c.link_fit.bytes_per_s / 1e9, 100 * c.link_fit.rms_rel_error,
                   c.link_fit.samples);
  return o;
}

}  // namespace paraplan
