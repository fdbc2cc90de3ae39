#!/usr/bin/env python3
"""Catch2 v2's console reporter (Debian's /usr/include/catch2/catch.hpp, ConsoleReporter::printHeaderString)
indents a test name's continuation lines past its first ": ". Where that indent reaches the console width (79
columns) the wrapping never ends: the test binary spins forever printing the name's tail as soon as it prints the
header (a failure, a WARN, -s). Every TEST_CASE name here keeps its first ": " early enough to leave room.
No name holds a ';' either: catch_discover_tests hands the names to CMake, whose lists split there, so ctest would
register the halves as tests that match nothing and fail.
  python3 tests/test_case_names.py REPO_ROOT"""
import pathlib
import re
import sys

WIDTH = 79  # CATCH_CONFIG_CONSOLE_WIDTH 80, less one
ROOM = 5    # columns left for the wrapped text (a ": " at column 77 loops, 83 crashes; 71 wraps)
literal = re.compile(r'"((?:[^"\\]|\\.)*)"')


def late(name):
    """Whether Catch's header wrap of `name` has no room left: its first ": " past column WIDTH - ROOM - 2."""
    i = name.find(": ")
    return i >= 0 and i + 2 > WIDTH - ROOM


# The check itself, on the two names measured here: ": " at column 77 spun the binary, at 71 it wrapped fine.
assert late("x" * 77 + ": tail"), "a name that hung Catch's console reporter passes the check"
assert not late("x" * 71 + ": tail"), "a name Catch's console reporter prints fails the check"
assert not late("no colon-space in this name"), "a name without ': ' fails the check"

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
bad, names = [], 0
for path in sorted((root / "tests").rglob("*.cpp")):
    text = path.read_text(encoding="utf-8")
    for m in re.finditer(r'TEST_CASE\(\s*', text):
        pos, name = m.end(), ""
        while True:  # adjacent string literals concatenate
            lit = literal.match(text, pos)
            if not lit:
                break
            name += lit.group(1)
            pos = lit.end()
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
        if not name:
            continue
        names += 1
        if ";" in name:
            line = text.count("\n", 0, m.start()) + 1
            bad.append(f"{path.relative_to(root)}:{line}: TEST_CASE \"{name}\" holds a ';', where CMake's lists split "
                       f"the name ctest registers (use a comma)")
        if late(name):
            i = name.find(": ")
            line = text.count("\n", 0, m.start()) + 1
            bad.append(f"{path.relative_to(root)}:{line}: the first ': ' of TEST_CASE \"{name}\" is at column {i}; "
                       f"Catch's console reporter loops forever or crashes wrapping names whose ': ' is past column "
                       f"{WIDTH - ROOM - 2} (put it earlier or drop it)")
for b in bad:
    print(b)
print(f"{names} TEST_CASE names read, {len(bad)} with a late ': ' or a ';'")
sys.exit(1 if bad or names == 0 else 0)
