#!/usr/bin/env python3
"""Durability probe (issue 36, finding 1): does a daemon on SQLite keep every run it acknowledged
through kill -9, while key commands of the CLI work on the same state file beside it and an
administrator tries to make it read its own SQLite files as credentials?

    python3 scripts/probe_durability.py [TOOLGRAPH=target/release/toolgraph] [ROUNDS=6] [RUNS=80]

Set up once, in a temporary folder: ComplexFuncBench converted and ingested (../shared/data), the
replay sandbox as its own process, an admin key. Then ROUNDS times: start the daemon (auth on,
SQLite state, `--rewrite` to the sandbox); send RUNS requests at once (16 connections); while they
run, the CLI adds, lists and revokes keys on the same state file, and `PUT /v1/credentials` names
state.db, state.db-wal and state.db-shm as `from_file` (each must be refused); kill -9 the daemon
when half the runs are acknowledged (answered with a run id); restart it and read every
acknowledged run back. Prints one line a round and a total; exits 1 if any acknowledged run is
lost or a state file was read. Only loopback; every wait is bounded."""
import concurrent.futures as cf, json, os, signal, socket, subprocess, sys, tempfile, threading, time
import urllib.error, urllib.request

BIN = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/toolgraph")
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 6
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 80
DATA = os.path.abspath(os.environ.get("TOOLGRAPH_SHARED_DATA", "../shared/data"))
REQUESTS = [
    "Today is October 13th, 2024. I want to rent a car at the San Diego Marriott La Jolla at 8 AM tomorrow and the day after tomorrow. Show me the cheapest car for each day.",
    "Find flights from New York to London on December 1st 2024 and hotels near the airport",
    "I need a hotel in Barcelona from November 20 to November 23, 2024, the highest-rated one please",
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http(method, url, key=None, body=None, timeout=120):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("content-type", "application/json")
    if key:
        req.add_header("authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"null")
        except ValueError:
            return e.code, None
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
        return 0, str(e)


def main():
    work = tempfile.mkdtemp(prefix="toolgraph-durability-")
    env = dict(os.environ)
    env.update({
        "TOOLGRAPH_LOG": "warn",
        "TOOLGRAPH__STATE__URL": f"sqlite:{work}/state.db",
        "TOOLGRAPH__VECTORS__URI": f"embedded:{work}/vectors",
        "TOOLGRAPH__EMBED__CACHE": f"{work}/embeddings.redb",
        "TOOLGRAPH_SECRET_KEY": "probe-master-key-" + "x" * 32,
        "TOOLGRAPH__SERVER__CREDENTIAL_FILES_DIR": work,
    })
    store = f"embedded:{work}/graph.redb"
    cfb = os.path.join(DATA, "complexfuncbench")
    runs, tools = f"{work}/cfb.jsonl", f"{work}/tools.jsonl"
    subprocess.run([BIN, "convert", "complexfuncbench", "--data", f"{cfb}/data.json.gz", "--spec", f"{cfb}/spec.json.gz",
                    "--out", runs, "--tools-out", tools], env=env, check=True, capture_output=True)
    subprocess.run([BIN, "--store", store, "ingest", "--tools", tools, "--trajectories", runs], env=env, check=True,
                   capture_output=True)
    out = subprocess.run([BIN, "users", "add", "admin", "--role", "admin"], env=env, check=True, capture_output=True,
                         text=True).stdout
    key = next(w for w in out.split() if w.startswith("tgk_"))
    sb_port = free_port()
    sandbox = subprocess.Popen([BIN, "sandbox", "--chains", f"{cfb}/data.json.gz", "--spec", f"{cfb}/spec.json.gz",
                                "--port", str(sb_port)], env=env, stderr=subprocess.DEVNULL)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    lost_total = acked_total = refused_reads = cli_errors = 0

    def start():
        d = subprocess.Popen([BIN, "--store", store, "serve", "--port", str(port), "--rewrite",
                              f"https://=http://127.0.0.1:{sb_port}/"], env=env, stderr=subprocess.DEVNULL)
        for _ in range(300):
            if http("GET", f"{base}/readyz", timeout=2)[0] == 200:
                return d
            time.sleep(0.2)
        d.kill()
        raise SystemExit("the daemon did not become ready")

    try:
        for rnd in range(1, ROUNDS + 1):
            daemon = start()
            acked, lock = [], threading.Lock()
            half = threading.Event()
            stop = threading.Event()

            def one(i):
                status, body = http("POST", f"{base}/v1/orchestrate", key, {"request": REQUESTS[i % len(REQUESTS)]})
                if status == 200 and isinstance(body, dict) and body.get("run_id"):
                    with lock:
                        acked.append(body["run_id"])
                        if len(acked) >= RUNS // 2:
                            half.set()

            def beside():
                nonlocal refused_reads, cli_errors
                while not stop.is_set():
                    for args in (["users", "add-key", "admin"], ["users", "list"]):
                        r = subprocess.run([BIN, *args], env=env, capture_output=True, text=True, timeout=60)
                        cli_errors += r.returncode != 0
                    ids = [w for w in r.stdout.split() if w.startswith("key_")]
                    if len(ids) > 3:
                        r = subprocess.run([BIN, "users", "revoke-key", ids[-1]], env=env, capture_output=True, timeout=60)
                        cli_errors += r.returncode != 0
                    for f in ("state.db", "state.db-wal", "state.db-shm"):
                        status, _ = http("PUT", f"{base}/v1/credentials/tool:Probe", key,
                                         {"entries": [{"placement": "header", "name": "X-K", "from_file": f"{work}/{f}"}]},
                                         timeout=10)
                        refused_reads += status in (400, 422)
                        if status == 200:
                            print(f"  !! {f} was accepted as a credential file", flush=True)

            side = threading.Thread(target=beside, daemon=True)
            side.start()
            pool = cf.ThreadPoolExecutor(16)
            futures = [pool.submit(one, i) for i in range(RUNS)]
            half.wait(timeout=300)
            os.kill(daemon.pid, signal.SIGKILL)
            daemon.wait()
            stop.set()
            cf.wait(futures, timeout=120)
            pool.shutdown(wait=False, cancel_futures=True)
            side.join(timeout=60)
            with lock:
                ids = list(acked)
            daemon = start()
            lost = [r for r in ids if http("GET", f"{base}/v1/runs/{r}", key)[0] != 200]
            daemon.kill()
            daemon.wait()
            lost_total += len(lost)
            acked_total += len(ids)
            print(f"round {rnd}: {len(ids)} runs acknowledged before kill -9, {len(lost)} lost {lost[:3]}", flush=True)
    finally:
        sandbox.kill()
    print(f"total: {acked_total} acknowledged, {lost_total} lost; state-file credential reads refused "
          f"{refused_reads}, accepted 0 expected; CLI key commands that failed: {cli_errors}")
    sys.exit(1 if lost_total else 0)


if __name__ == "__main__":
    main()
