#!/usr/bin/env python3
"""Reruns every command the README shows ("$ ..." lines in its code blocks) from the
source root and replaces the output printed under it with what the command prints
now. The test readme_commands checks that the README and the binary agree.
Usage: python3 scripts/update_readme.py [BINARY]   (default build/paraplan)"""
import pathlib
import subprocess
import sys

root = pathlib.Path(__file__).resolve().parent.parent
binary = sys.argv[1] if len(sys.argv) > 1 else "build/paraplan"
lines = (root / "README.md").read_text(encoding="utf-8").split("\n")
out, in_block, skipping = [], False, False
for line in lines:
    if line.startswith("```"):
        in_block, skipping = not in_block, False
        out.append(line)
        continue
    if in_block and line.startswith("$ "):
        cmd = line[2:]
        r = subprocess.run(["bash", "-c", cmd.replace("build/paraplan", binary)], cwd=root, capture_output=True,
                           text=True, timeout=300)
        out.append(line)
        out.extend(r.stdout.rstrip("\n").split("\n") if r.stdout.strip() else [])
        skipping = True
        continue
    if not (in_block and skipping):
        out.append(line)
(root / "README.md").write_text("\n".join(out), encoding="utf-8")
