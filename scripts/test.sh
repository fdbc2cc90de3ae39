#!/usr/bin/env bash
# Install what is missing, build, and run the whole test suite; exits with ctest's status.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
status=0
ctest --test-dir build --output-on-failure -j2 || status=$?
exit "$status"
