#!/usr/bin/env python3
"""Runs every command the README shows ("$ ..." lines in its code blocks) from the
source root, with build/paraplan replaced by the binary under test, and checks:
its exit status is 0 (the README's failing examples end in `; echo "exit $?"`), an
"exit N" line the README shows is what the command printed, and the first line of
output is the README's first line (so the README cannot go stale unnoticed).
Usage: readme_commands.py SOURCE_DIR PARAPLAN_BINARY"""
import subprocess
import sys

src, binary = sys.argv[1], sys.argv[2]
lines = open(f"{src}/README.md", encoding="utf-8").read().split("\n")
commands = []  # (line number, command, the README's output lines)
in_block = False
for i, line in enumerate(lines):
    if line.startswith("```"):
        in_block = not in_block
        continue
    if in_block and line.startswith("$ "):
        commands.append((i + 1, line[2:], []))
    elif in_block and commands and commands[-1][0] < i + 1 and not line.startswith("$ "):
        commands[-1][2].append(line)
    if not in_block and commands:
        pass
failures = 0
for lineno, cmd, shown in commands:
    run = cmd.replace("build/paraplan", binary)
    try:
        r = subprocess.run(["bash", "-c", run], cwd=src, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        print(f"README.md:{lineno}: timed out: {cmd}")
        failures += 1
        continue
    out = r.stdout.rstrip("\n").split("\n")
    problems = []
    if r.returncode != 0:
        problems.append(f"exit status {r.returncode}: {r.stderr.strip()[:300]}")
    for s in shown:
        if s.startswith("exit ") and s not in out:
            problems.append(f"README shows '{s}', the command printed {[o for o in out if o.startswith('exit ')]}")
    if shown and out and shown[0] != out[0]:
        problems.append(f"first line differs:\n  README: {shown[0]}\n  now:    {out[0]}")
    status = "ok" if not problems else "FAIL"
    print(f"README.md:{lineno}: {status}: {cmd}")
    for p in problems:
        print("    " + p)
    failures += bool(problems)
print(f"{len(commands)} README commands, {failures} failed")
if not commands:
    print("no commands found in README.md")
    sys.exit(1)
sys.exit(1 if failures else 0)
