// Writes a Spec back as a plan-spec YAML that load_spec_file reads to the same
// values (model and cluster inline). The GUI hands its edited spec to
// `paraplan validate` this way; gui/tests/test_inputs.cpp checks the round trip.
#pragma once

#include <string>

#include "costmodel/spec.hpp"

namespace paraplan::gui {

std::string spec_to_yaml(const Spec& spec);

}  // namespace paraplan::gui
