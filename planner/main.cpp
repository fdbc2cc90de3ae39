// paraplan CLI. Every bad input is caught here once and printed as one line
// naming file, field and what was expected; exit code 2.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "planner/cli.hpp"
#include "planner/spec_error.hpp"

int main(int argc, char** argv) {
  try {
    return paraplan::run_cli(argc, argv, std::cout);
  } catch (const paraplan::SpecError& e) {
    std::fflush(stdout);
    std::cerr << "paraplan: error: " << e.one_line() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::cerr << "paraplan: error: " << paraplan::SpecError::printable(e.what(), 512) << "\n";
    return 2;
  }
}
