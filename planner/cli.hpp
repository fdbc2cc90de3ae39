#pragma once

#include <ostream>

namespace paraplan {

// Runs the paraplan command line; returns the exit code (0 ok, 1 does not fit,
// 2 bad input). Throws SpecError for bad specs (main prints it).
int run_cli(int argc, char** argv, std::ostream& out);

}  // namespace paraplan
