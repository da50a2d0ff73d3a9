#!/usr/bin/env python3
"""Connection-level probe of a daemon on loopback: hold IDLE idle sockets and SLOW slow-header
clients open (a byte a second) while timing /healthz every 200 ms for WINDOW seconds.

    python3 scripts/probe_connections.py http://127.0.0.1:8080 [IDLE=300] [SLOW=50] [WINDOW=20]

Prints /healthz latency (p50, p95, max), failures, and how many of the idle and slow sockets the
daemon had closed by the end. Only 127.0.0.0/8 targets are accepted; every loop is bounded."""
import asyncio, statistics, sys, time
from urllib.parse import urlsplit


async def idle_client(host, port, closed):
    try:
        r, w = await asyncio.open_connection(host, port)
    except OSError:
        closed.append("refused")
        return
    try:
        data = await asyncio.wait_for(r.read(1), timeout=WINDOW + 5)
        closed.append("closed" if not data else "answered")
    except (asyncio.TimeoutError, OSError):
        pass
    finally:
        w.close()


async def slow_client(host, port, closed):
    try:
        r, w = await asyncio.open_connection(host, port)
        w.write(b"GET /healthz HTTP/1.1\r\nHost: probe\r\n")
        await w.drain()
        for _ in range(int(WINDOW) + 5):
            await asyncio.sleep(1)
            w.write(b"X")
            await w.drain()
            if r.at_eof():
                closed.append("closed")
                return
    except OSError:
        closed.append("closed")
        return
    w.close()


async def health(host, port, samples, failures):
    end = time.monotonic() + WINDOW
    while time.monotonic() < end:
        t = time.monotonic()
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=5)
            w.write(b"GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
            await w.drain()
            line = await asyncio.wait_for(r.readline(), timeout=5)
            w.close()
            if line.startswith(b"HTTP/1.1 200"):
                samples.append((time.monotonic() - t) * 1000)
            else:
                failures.append(line[:40])
        except (asyncio.TimeoutError, OSError) as e:
            failures.append(type(e).__name__)
        await asyncio.sleep(0.2)


async def main():
    url = urlsplit(sys.argv[1])
    host, port = url.hostname, url.port or 80
    if not host.startswith("127.") and host != "localhost":
        sys.exit("loopback targets only")
    idle_closed, slow_closed, samples, failures = [], [], [], []
    tasks = [asyncio.create_task(idle_client(host, port, idle_closed)) for _ in range(IDLE)]
    tasks += [asyncio.create_task(slow_client(host, port, slow_closed)) for _ in range(SLOW)]
    await asyncio.sleep(0.5)
    await health(host, port, samples, failures)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    q = sorted(samples)
    p = lambda f: q[min(len(q) - 1, int(f * len(q)))] if q else float("nan")
    print(f"{IDLE} idle + {SLOW} slow-header clients, {WINDOW:.0f} s: /healthz {len(samples)} ok, {len(failures)} failed;"
          f" latency ms p50 {p(0.5):.1f} p95 {p(0.95):.1f} max {max(q) if q else float('nan'):.1f};"
          f" idle closed by the daemon {idle_closed.count('closed')}, refused {idle_closed.count('refused')}; slow closed {slow_closed.count('closed')}")


IDLE = int(sys.argv[2]) if len(sys.argv) > 2 else 300
SLOW = int(sys.argv[3]) if len(sys.argv) > 3 else 50
WINDOW = float(sys.argv[4]) if len(sys.argv) > 4 else 20.0
asyncio.run(main())
