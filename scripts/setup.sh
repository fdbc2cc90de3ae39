#!/usr/bin/env bash
# Installs paraplan's build dependencies (Debian bookworm packages) when any
# is missing, then configures and builds paraplan into build/.
# --packages-only: install, do not build (scripts/quickstart.sh builds only the CLI).
# Run as root, or as a user with sudo (used only when something must be installed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(
  cmake g++ make pkg-config
  libyaml-cpp-dev libcli11-dev libeigen3-dev catch2
  nlohmann-json3-dev libfmt-dev libbenchmark-dev
  openmpi-bin libopenmpi-dev
  libimgui-dev libglfw3-dev libgl1-mesa-dev libgl1-mesa-dri libstb-dev xvfb xauth
  python3-torch  # the PyTorch oracle test (tests/oracle), under the system /usr/bin/python3
  clang libclang-rt-14-dev  # libFuzzer + sanitizers for the fuzz harnesses (scripts/fuzz.sh)
)

installed() {
  dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'
}

if ! command -v dpkg >/dev/null 2>&1; then
  echo "setup.sh: dpkg not found; install these (Debian names) by hand: ${packages[*]}" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup.sh: installing ${missing[*]}"
  if [[ $(id -u) -eq 0 ]]; then
    as_root=(env DEBIAN_FRONTEND=noninteractive)
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo env DEBIAN_FRONTEND=noninteractive)
  else
    echo "setup.sh: missing ${missing[*]}; run as root or install sudo" >&2
    exit 1
  fi
  "${as_root[@]}" apt-get update
  "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "setup.sh: all ${#packages[@]} packages present"
fi

[[ ${1:-} == --packages-only ]] && exit 0
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
