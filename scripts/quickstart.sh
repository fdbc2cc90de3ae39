#!/usr/bin/env bash
# The first run: install what is missing (Debian packages), build only the
# paraplan CLI (not the tests, GUI or benchmarks), and plan the default
# example: Llama-2-7B on one DGX H100, every layout searched, the fastest that
# fits recommended with the trade-offs. scripts/test.sh builds and tests everything.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh --packages-only
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target paraplan -j"$(nproc)"
echo
build/paraplan plan configs/examples/llama2-7b-dgx-h100.yaml --top 5
