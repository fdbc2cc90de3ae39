#!/bin/sh
# Regenerates the screenshots in docs/ (docs/gui.md shows them) with
# paraplan-gui --screenshot under a virtual X server (Mesa software GL).
# usage: sh gui/make_screenshots.sh [BUILD_DIR]   (default: build)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
gui="$build/paraplan-gui"
ex=configs/examples
big=$ex/llama3.1-70b-h100-64-full.yaml          # 11,778 layouts
recipe70="dp=2,tp=8,pp=4,vpp=5,sp=1,zero=1,recompute=selective,mbs=1"
shot() {  # NAME SPEC [options...]
  name=$1 spec=$2
  shift 2
  xvfb-run -a -s "-screen 0 1600x1000x24" "$gui" "$spec" --screenshot "docs/gui-$name.png" "$@"
}
shot overview $big --view overview --select "$recipe70"
shot inputs $ex/llama2-7b-dgx-h100.yaml --view inputs
shot table $big --view table --sort step    # the recommended row among the faster OOM ones
shot chart $big --view chart --tooltip
shot layout $big --view layout --select "$recipe70"
# A real `paraplan validate` run (8 ranks under mpirun, CPU backend), about 20 s here.
shot validate $ex/tiny-cpu.yaml --view validate --select "dp=2,tp=2,pp=2,zero=1,recompute=none,mbs=1" --validate
