#!/usr/bin/env python3
"""The largest Rust files and functions of the workspace, as rustfmt leaves them (issue 37's bar:
files <= 700 lines, functions <= 120). Usage: python3 scripts/sizes.py [N] [--check]
--check exits 1 when a file or a function is over the bar (tests and benches included)."""
import os, re, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SKIP = {"target", "node_modules", ".git", ".assets", ".tgdata"}
FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"C\"\s+)?fn\s+(\w+)")


def rust_files():
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in SKIP and not x.startswith(".")]
        for f in files:
            if f.endswith(".rs"):
                yield os.path.relpath(os.path.join(d, f), ROOT)


def strip(line):
    """The line without string literals and comments (braces inside them do not count)."""
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(?:\\.|[^'\\])'", "''", line)
    return line.split("//", 1)[0]


def functions(path, lines):
    """(lines, path:line name) of each fn with a body, from its signature to its closing brace."""
    out = []
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        depth, opened = 0, False
        for j in range(i, len(lines)):
            s = strip(lines[j])
            if not opened and ";" in s and "{" not in s:
                break  # a declaration without a body
            depth += s.count("{") - s.count("}")
            opened = opened or "{" in s
            if opened and depth <= 0:
                out.append((j - i + 1, f"{path}:{i + 1} {m.group(1)}"))
                break
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 10
    files, fns = [], []
    for p in rust_files():
        with open(os.path.join(ROOT, p), encoding="utf-8") as f:
            lines = f.read().split("\n")
        files.append((len(lines) - (1 if lines and lines[-1] == "" else 0), p))
        fns.extend(functions(p, lines))
    files.sort(reverse=True)
    fns.sort(reverse=True)
    print(f"largest files (bar: 700 lines; {sum(1 for x, _ in files if x > 700)} over)")
    for size, p in files[:n]:
        print(f"{size:6}  {p}")
    print(f"largest functions (bar: 120 lines; {sum(1 for x, _ in fns if x > 120)} over)")
    for size, p in fns[:n]:
        print(f"{size:6}  {p}")
    if "--check" in sys.argv and (any(x > 700 for x, _ in files) or any(x > 120 for x, _ in fns)):
        sys.exit(1)


main()
