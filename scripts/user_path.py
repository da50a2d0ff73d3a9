#!/usr/bin/env python3
"""The user's path, measured with the shipped binary alone (issue 50).

One fold of ComplexFuncBench's dev chains (every k-th chain held out, the rest for learning):

1. `toolgraph convert complexfuncbench` + `toolgraph ingest` of the training chains into fresh
   embedded stores (graph, argument model, long-term memory, usage vectors);
2. `toolgraph sandbox` serving every chain's recorded responses (the held-out chains last), each
   request's own sample's first (`POST /_sandbox/sample`), as the benchmark's runner answers a
   sample's calls and as the harness's sandbox does (a call a training chain recorded is answered
   as the live API answered it);
3. every held-out request asked with `toolgraph ask --no-learn --json` (and, with --daemon, POSTed
   to `/v1/orchestrate` of `toolgraph serve` on the same stores), the runs written as predictions;
4. `toolgraph eval score` of those runs (over the same recordings), beside
   `toolgraph eval chains --train … --test …` on the same chains (the evaluation harness, which
   builds its fold with the same ingest).

Usage: python3 scripts/user_path.py [--bin target/release/toolgraph] [--out DIR] [--fold 0]
       [--folds 5] [--limit N] [--daemon]
Prints one table; every file it wrote stays under --out.
"""
import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import time
import urllib.request


def sh(cmd, env=None, **kw):
    return subprocess.run(cmd, check=True, env=env, **kw)


def listening(proc, marker):
    """The port a child prints after `marker` (`http://127.0.0.1:PORT`)."""
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stderr.readline().decode(errors="replace")
        if not line and proc.poll() is not None:
            sys.exit(f"{marker} ended early")
        m = re.search(re.escape(marker) + r".*http://127\.0\.0\.1:(\d+)", line)
        if m:
            return int(m.group(1))
    sys.exit(f"no {marker} line in 120 s")


def post(url, body, timeout=300):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=timeout))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/toolgraph")
    ap.add_argument("--data", default=os.environ.get("TOOLGRAPH_SHARED_DATA", "../shared/data"))
    ap.add_argument("--out", default=".tgdata/user-path")
    ap.add_argument("--fold", type=int, default=0)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--limit", type=int, default=0, help="ask at most this many held-out requests")
    ap.add_argument("--daemon", action="store_true", help="also POST them to the daemon")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cfb = os.path.join(a.data, "complexfuncbench")
    spec = os.path.join(cfb, "spec.json.gz")
    chains = json.load(gzip.open(os.path.join(cfb, "data.json.gz")))
    train = [c for i, c in enumerate(chains) if i % a.folds != a.fold]
    test = [c for i, c in enumerate(chains) if i % a.folds == a.fold]
    if a.limit:
        test = [test[i * len(test) // a.limit] for i in range(min(a.limit, len(test)))]
    paths = {k: os.path.join(a.out, f"{k}.json") for k in ("train", "test")}
    for k, v in (("train", train), ("test", test)):
        json.dump(v, open(paths[k], "w"))
    # Every recorded call answers, the held-out chains last, as the evaluation harness's sandbox
    # answers (`eval chains`): the live API would have answered a call a training chain recorded.
    every = os.path.join(a.out, "every.json")
    json.dump(train + test, open(every, "w"))
    env = dict(os.environ)
    env["TOOLGRAPH__VECTORS__URI"] = "embedded:" + os.path.join(a.out, "vectors")
    env["TOOLGRAPH_LOG"] = "warn"
    store = "embedded:" + os.path.join(a.out, "graph.redb")
    runs, tools = os.path.join(a.out, "train.jsonl"), os.path.join(a.out, "tools.jsonl")
    sh([a.bin, "convert", "complexfuncbench", "--data", paths["train"], "--spec", spec, "--out", runs, "--tools-out", tools],
       env=env, stdout=subprocess.DEVNULL)
    t0 = time.time()
    sh([a.bin, "--store", store, "ingest", "--tools", tools, "--trajectories", runs], env=env)
    print(f"ingest: {time.time() - t0:.1f} s", file=sys.stderr)
    sandbox = subprocess.Popen([a.bin, "sandbox", "--chains", every, "--spec", spec, "--port", "0"],
                               env=env, stderr=subprocess.PIPE)
    daemon = None
    try:
        port = listening(sandbox, "replay sandbox:")
        rewrite = f"https://=http://127.0.0.1:{port}/"
        rows = []
        preds = os.path.join(a.out, "ask.jsonl")
        t0 = time.time()
        with open(preds, "w") as f:
            for c in test:
                # The sandbox answers this sample's own recordings first, as the benchmark's runner does.
                post(f"http://127.0.0.1:{port}/_sandbox/sample", {"request": c["input"]})
                out = subprocess.run([a.bin, "--store", store, "ask", "--no-learn", "--json", "--rewrite", rewrite,
                                      c["input"].strip()], env=env, capture_output=True)
                try:
                    f.write(json.dumps(json.loads(out.stdout)) + "\n")
                except json.JSONDecodeError:
                    print(f"ask failed: {out.stderr.decode()[-400:]}", file=sys.stderr)
        rows.append(("ask --no-learn (CLI)", preds, time.time() - t0))
        if a.daemon:
            daemon = subprocess.Popen([a.bin, "--store", store, "serve", "--port", "0", "--rewrite", rewrite],
                                      env={**env, "TOOLGRAPH__RUN__LEARN": "false", "TOOLGRAPH__RUN__REMEMBER": "false"},
                                      stderr=subprocess.PIPE)
            dport = listening(daemon, "toolgraph daemon on")
            preds = os.path.join(a.out, "daemon.jsonl")
            t0 = time.time()
            with open(preds, "w") as f:
                for c in test:
                    post(f"http://127.0.0.1:{port}/_sandbox/sample", {"request": c["input"]})
                    r = post(f"http://127.0.0.1:{dport}/v1/orchestrate", {"request": c["input"].strip()})
                    f.write(json.dumps(r) + "\n")
            rows.append(("POST /v1/orchestrate (daemon)", preds, time.time() - t0))
        table = []
        for name, preds, secs in rows:
            report = os.path.join(a.out, os.path.basename(preds) + ".score.json")
            sh([a.bin, "eval", "score", "--chains", every, "--spec", spec, "--predictions", preds,
                "--report", report], env=env, stdout=subprocess.DEVNULL)
            r = json.load(open(report))
            table.append((name, r["scored"], r["overall_success"], r["overall_call_acc"], secs))
        for p in (sandbox, daemon):
            if p:
                p.kill()
                p.wait()
        harness = os.path.join(a.out, "chains.json")
        sh([a.bin, "eval", "chains", "--train", paths["train"], "--test", paths["test"], "--spec", spec,
            "--methods", "graph", "--report", harness], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        h = json.load(open(harness))
        print(f"fold {a.fold} of {a.folds}: {len(train)} chains learned, {len(test)} held out\n")
        print("| path | requests | Overall Success | Overall Call Acc. | seconds |")
        print("|---|---:|---:|---:|---:|")
        for name, n, s, acc, secs in table:
            print(f"| {name} | {n} | {s:.1f} | {acc:.1f} | {secs:.0f} |")
        for m in h.get("methods", []):
            print(f"| eval chains --train --test ({m['method']}) | {m['chains']} | "
                  f"{100 * m['overall_success_rate']:.1f} | {100 * m['overall_call_acc']:.1f} | {h.get('seconds', 0):.0f} |")
    finally:
        for p in (sandbox, daemon):
            if p:
                p.kill()


if __name__ == "__main__":
    main()
