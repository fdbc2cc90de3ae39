#!/bin/sh
# Runs paraplan-gui under a virtual X server and checks the PNG it writes.
# usage: screenshot_test.sh GUI CHECKER OUT.png SPEC [paraplan-gui options...]
# CHECKER and OUT.png may be "-": no screenshot (e.g. --replan-benchmark).
# Exit 77 (ctest SKIP_RETURN_CODE) when xvfb-run is not installed.
gui=$1 check=$2 out=$3
shift 3
if ! command -v xvfb-run >/dev/null 2>&1; then
  echo "SKIP: xvfb-run not found (apt-get install xvfb xauth)"
  exit 77
fi
if [ "$out" = - ]; then
  exec xvfb-run -a -s "-screen 0 1600x1000x24" "$gui" "$@"
fi
rm -f "$out"
xvfb-run -a -s "-screen 0 1600x1000x24" "$gui" "$@" --screenshot "$out" || {
  echo "paraplan-gui exited with $?"
  exit 1
}
exec "$check" "$out"
