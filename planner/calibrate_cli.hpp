// `paraplan calibrate`: measures GEMM throughput, memory-bound kernels and
// collective bandwidth/latency on the backend at hand (launching mpirun itself
// for the collectives, or as one rank under an existing launcher), fits the
// time model's parameters (validate/calibrate.hpp) and writes a cluster spec
// that `plan`, `explain`, `check` and `validate` accept. docs/calibration.md.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "costmodel/model.hpp"
#include "validate/calibrate.hpp"

namespace paraplan {

struct CalibrateOptions {
  std::string backend = "cpu";
  std::string output;
  int ranks = 2;
  bool quick = false;
  std::string launcher = "mpirun";
  std::string precision = "bf16";
  std::optional<double> memory_gib;
  std::string name;
  double timeout_s = 600;
  std::string mpirun_args;
  std::string result_dir;  // internal: where rank 0 of a launched run writes its samples
  std::string save_samples;  // also write the measured samples (JSON) here
  std::string from_samples;  // fit these saved samples instead of measuring
};

CLI::App* add_calibrate_command(CLI::App& app, CalibrateOptions* o);
int run_calibrate(CalibrateOptions& o, std::ostream& out);

// Everything a calibration measured and fitted, and where.
struct Calibration {
  std::string backend = "cpu";
  std::string host, date;   // gethostname, UTC ISO 8601
  std::string device_name;  // CPU model or GPU name
  DType precision = DType::kBf16;
  int ranks = 1;            // MPI ranks (1: no collectives measured)
  int cores = 1;            // hardware threads of the host
  bool mpi = false;         // collectives measured
  double memory_gib = 0;
  std::string memory_source;  // how memory_gib was obtained
  validate::Samples samples;  // GEMMs in both dtypes, the rest in the precision's
  validate::GemmFit gemm_fit, other_gemm_fit;  // the precision's, and the other dtype's
  validate::MemoryFit memory_fit;
  validate::StepFit step_fit;  // what the cluster's gemm/hbm_efficiency come from
  validate::LinkFit link_fit;
  // A fit of hbm_efficiency below kMinHbmEfficiency says the measured non-GEMM
  // work is not HBM traffic (the GPU executor's reference-grade kernels), so
  // it is reported but not used: the cluster keeps the default hbm_efficiency
  // of the measured copy rate, and a step fit that lands there is not written.
  bool memory_fit_rejected = false, step_fit_rejected = false;
  double hbm_efficiency_used() const;
  bool oversubscribed() const { return ranks > cores; }
};
// JUDGEMENT: a memory-bound kernel moves its bytes at no less than 5 % of the
// best copy rate; work fitted slower than that is bound by something else
// (latency, one thread per element, one warp per attention row: docs/gpu.md).
inline constexpr double kMinHbmEfficiency = 0.05;

// The samples as JSON: how the ranks of a launched run hand them back.
nlohmann::json samples_json(const validate::Samples& s);
validate::Samples samples_from_json(const nlohmann::json& j);

// Fits gemm_fit, other_gemm_fit, memory_fit and link_fit from the samples
// (and fills each sample's fitted time).
void fit_calibration(Calibration* c);
// The cluster the fits describe (what the YAML says).
Cluster calibrated_cluster(const Calibration& c, const std::string& name);
// The cluster spec YAML, a comment per number saying how it was measured.
std::string calibrated_cluster_yaml(const Calibration& c, const std::string& name);
// The report: every sample measured against fitted, and each fit's RMS error.
std::string render_calibration(const Calibration& c);

}  // namespace paraplan
