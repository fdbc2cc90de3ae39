// `paraplan validate`: runs real sharded training steps of a layout (launching
// mpirun itself, or as one rank under an existing launcher, or as one emulated
// rank) and compares the measured memory and step time with the prediction.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace paraplan {

struct ValidateOptions {
  std::string spec, layout, megatron, deepspeed;
  CLI::Option *layout_opt = nullptr, *megatron_opt = nullptr, *deepspeed_opt = nullptr;
  int steps = 3;
  std::string backend = "cpu";
  std::string format = "table";
  std::string launcher = "mpirun";
  std::optional<int> emulate_rank;
  std::optional<double> memory_limit_gib;
  double tolerance = 0.02;
  double timeout_s = 600;      // whole run
  double stall_timeout_s = 120;  // no progress on some rank
  float lr = 1e-3f;
  std::uint64_t seed = 1234;
  bool grad_check = false;
  std::string output;
  std::string mpirun_args;
  // Internal (set by the launching process for its ranks).
  std::string result_dir;
  std::optional<int> debug_stall_rank, debug_exit_rank;
};

CLI::App* add_validate_command(CLI::App& app, ValidateOptions* o);
int run_validate(ValidateOptions& o, std::ostream& out);

}  // namespace paraplan
