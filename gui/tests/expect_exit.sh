#!/bin/sh
# usage: expect_exit.sh CODE TEXT COMMAND...: passes when COMMAND exits with
# CODE and its stderr contains TEXT.
code=$1 text=$2
shift 2
err=$("$@" 2>&1 >/dev/null)
rc=$?
echo "$err"
[ "$rc" -eq "$code" ] || { echo "exit $rc, expected $code"; exit 1; }
case "$err" in
  *"$text"*) exit 0 ;;
  *) echo "stderr lacks '$text'"; exit 1 ;;
esac
