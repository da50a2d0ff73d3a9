#!/usr/bin/env python3
"""Typing slips in plain words, for `eval complexfuncbench --reworded`: every ComplexFuncBench dev
request with some of its plain words mistyped (one letter swapped with the next, left out,
doubled, or a neighbour key struck instead), names, places, dates, times and figures kept
verbatim. A plain word is lower-case letters only, five letters or more, and no month or weekday.
Deterministic (a seed); writes the `--reworded` format (index, original_sha256, reworded).

    python3 scripts/typos.py --rate 0.25 --out /tmp/typos.jsonl
    toolgraph eval complexfuncbench --methods graph --reworded /tmp/typos.jsonl --reworded-only
"""
import argparse
import gzip
import hashlib
import json
import os
import random
import re

KEYS = ["qwertyuiop", "asdfghjkl", "zxcvbnm"]
CALENDAR = {
    "january", "february", "march", "april", "june", "july", "august", "september",
    "october", "november", "december", "monday", "tuesday", "wednesday", "thursday", "friday",
    "saturday", "sunday",
}


def neighbours(c):
    for r, row in enumerate(KEYS):
        i = row.find(c)
        if i >= 0:
            out = [row[j] for j in (i - 1, i + 1) if 0 <= j < len(row)]
            for rr in (r - 1, r + 1):
                if 0 <= rr < len(KEYS) and i < len(KEYS[rr]):
                    out.append(KEYS[rr][i])
            return out
    return [c]


def slip(word, rng):
    i = rng.randrange(1, len(word) - 1)  # the first and last letters stay: the word stays readable
    kind = rng.choice(["swap", "drop", "double", "neighbour"])
    if kind == "swap":
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if kind == "drop":
        return word[:i] + word[i + 1:]
    if kind == "double":
        return word[:i] + word[i] + word[i:]
    return word[:i] + rng.choice(neighbours(word[i])) + word[i + 1:]


def mistype(text, rate, rng):
    def one(m):
        w = m.group(0)
        if len(w) < 5 or w in CALENDAR or rng.random() >= rate:
            return w
        return slip(w, rng)

    # Lower-case words only: a capitalised word may be a name, and names stay verbatim.
    return re.sub(r"(?<![\w'])[a-z]+(?![\w'])", one, text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = os.environ.get("TOOLGRAPH_SHARED_DATA", os.path.join(os.path.dirname(__file__), "../../shared/data"))
    ap.add_argument("--data", default=os.path.join(shared, "complexfuncbench/data.json.gz"))
    ap.add_argument("--rate", type=float, default=0.25, help="share of plain words mistyped")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    chains = json.load(gzip.open(a.data))
    with open(a.out, "w") as out:
        for i, c in enumerate(chains):
            text = c["input"].strip()
            sha = hashlib.sha256(text.encode()).hexdigest()[:16]
            out.write(json.dumps({"index": i, "original_sha256": sha, "reworded": mistype(text, a.rate, rng)}) + "\n")


if __name__ == "__main__":
    main()
