#!/usr/bin/env python3
"""Import circles between the files of one crate (issue 37): file A names an item of file B
(`use`, or a `crate::` / `super::` / `self::` path in code) and B, directly or through others,
names one of A. Test modules (`#[cfg(test)]` to the end of the file) are left out.
Usage: python3 scripts/circles.py [--check]   (--check exits 1 when a circle is found)"""
import os, re, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CRATES = {  # crate folder -> its source root
    "engine": "engine/src", "graph": "graph/src", "schema": "schema/src", "ingest": "ingest/src",
    "eval": "eval/src", "server": "server/src", "sandbox": "sandbox/src", "cli": "src",
}
PATH = re.compile(r"(?<![:\w])([a-z_]\w*)((?:::\w+)+)")
USE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M)


def modules(src):
    """module path (tuple) -> file, for every .rs file under src."""
    out = {}
    for d, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(d, f), src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            out[tuple(rel)] = os.path.join(d, f)
    return out


def code(path):
    text = open(path, encoding="utf-8").read()
    i = text.find("#[cfg(test)]")
    text = text if i < 0 else text[:i]
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return "\n".join(l.split("//", 1)[0] for l in text.split("\n"))


def targets(mod, text, mods):
    """The modules `mod` names: each path resolved to the longest module that exists."""
    found = set()
    paths = []
    for m in USE.finditer(text):
        body = re.sub(r"\s+", "", m.group(1))
        # expand one level of braces: a::{b, c::d} -> a::b, a::c::d
        head, _, rest = body.partition("{")
        if rest:
            for part in rest.rstrip("}").split(","):
                if part:  # `a::{b, c,}`: a trailing comma names nothing
                    paths.append(head + part)
        else:
            paths.append(body)
    paths += [m.group(1) + m.group(2) for m in PATH.finditer(text)]
    for p in paths:
        segs = [s for s in p.split("::") if s]
        if not segs:
            continue
        if segs[0] == "crate":
            base, segs = (), segs[1:]
        elif segs[0] in ("super", "self"):
            base = mod
            while segs and segs[0] in ("super", "self"):
                base = base[:-1] if segs[0] == "super" else base
                segs = segs[1:]
        else:
            base = mod  # a child module by name
            if (mod + (segs[0],)) not in mods:
                continue
        for n in range(len(segs), -1, -1):
            cand = base + tuple(segs[:n])
            if cand in mods and cand != mod:
                found.add(cand)
                break
    return found


def circles():
    out = []
    for name, src in CRATES.items():
        mods = modules(os.path.join(ROOT, src))
        edges = {m: targets(m, code(f), mods) for m, f in mods.items()}
        # strongly connected components (Tarjan)
        index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

        def visit(v):
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in edges.get(v, ()):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(comp)

        sys.setrecursionlimit(10000)
        for v in mods:
            if v not in index:
                visit(v)
        for c in comps:
            out.append((name, sorted(os.path.relpath(mods[m], ROOT) for m in c)))
    return out


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly
    found = circles()
    print(f"import circles between the files of one crate: {len(found)}")
    for crate, files in found:
        print(f"  {crate}: " + " ↔ ".join(files))
    sys.exit(1 if found and "--check" in sys.argv else 0)
