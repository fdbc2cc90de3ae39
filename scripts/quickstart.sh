#!/usr/bin/env bash
# Install what is missing, build, and explain the default example: Llama-2-7B
# on one DGX H100 with the NeMo recipe's layout, every memory term with its formula.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
echo
build/paraplan explain configs/examples/llama2-7b-dgx-h100.yaml --formulas
