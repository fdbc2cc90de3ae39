#!/usr/bin/env bash
# Install what is missing, build, and run the whole test suite; exits with ctest's status.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
status=0
ctest --test-dir build --output-on-failure -j2 || status=$?

# The unit tests again, built with AddressSanitizer + UndefinedBehaviorSanitizer
# (build-asan/; leak checks off: Open MPI's own allocations would drown them). -g1
# (line tables: enough for the reports' file:line) and the test sources at -O0
# (tests/CMakeLists.txt) cut this build from 663 s to 384 s on a 2-core VM; the run
# took the same (303 s, 300 s).
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O1 -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DPARAPLAN_SANITIZE=ON \
  -DPARAPLAN_CUDA=OFF -DPARAPLAN_WERROR=OFF >/dev/null
cmake --build build-asan -j"$(nproc)" --target paraplan paraplan_tests >build-asan/build.log 2>&1 ||
  { tail -40 build-asan/build.log; echo "test.sh: the sanitizer build failed"; exit 1; }
echo "test.sh: unit tests under ASan + UBSan (build-asan/tests/paraplan_tests)"
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 PARAPLAN_TEST_CLI_TIMEOUT=600 \
  timeout 1200 build-asan/tests/paraplan_tests '~[signals]~[slow]' || status=$?  # process timing, not memory: ctest ran them

# A short fuzz run of every harness (longer: bash scripts/fuzz.sh 600).
bash scripts/fuzz.sh 15 || status=$?
exit "$status"
