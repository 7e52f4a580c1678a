#!/usr/bin/env python3
"""N agents at once over HTTP, each in its own workspace (bench/envs_bench.sh).

Against `agentenv serve --listen` at PORT: forks N workspaces of HEAD, then
each agent loops for SECONDS over its own endpoint /w/NAME/mcp: edit a file
(exec, snapshot: false), run a short command (exec, snapshotted), snapshot,
read a diff. Prints aggregate operations per second and p50/p99 per
operation for N. With `idle K`: RSS of the server (PID) before and after K
idle workspaces with an initialized MCP session each, per workspace.

With `run`, a probe beside the agents reads only (a diff every 5 ms in a
workspace of its own): its p50/p99 are reads' latency under that load;
`run 0` is the probe alone, on an idle server. PROBE=ping: the probe sends
MCP ping instead (the same path, no operation: the floor of a read).
AGENT_NICE=N runs the agents' processes N nicer (remote agents' stand-ins).

Usage: envs_load.py PORT TOKEN run N SECONDS
       envs_load.py PORT TOKEN idle K PID
"""
import http.client
import json
import multiprocessing
import os
import sys
import time
import urllib.request

PORT, TOKEN, MODE = int(sys.argv[1]), sys.argv[2], sys.argv[3]
PROBE = os.environ.get("PROBE", "diff")


# One keep-alive connection per process (as an MCP client holds one): a
# new TCP connection per call would put the client's connect and the
# server's accept into every latency measured.
CONN = {}


def post(path, session, msg, timeout=120):
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Authorization": "Bearer " + TOKEN}
    if session:
        headers["Mcp-Session-Id"] = session
    for attempt in (0, 1):
        conn = CONN.get(os.getpid())
        if conn is None:
            conn = CONN[os.getpid()] = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
        try:
            conn.request("POST", path, body=json.dumps(msg).encode(), headers=headers)
            r = conn.getresponse()
            body = r.read().decode()
            break
        except (http.client.HTTPException, ConnectionError):
            conn.close()
            del CONN[os.getpid()]
            if attempt:
                raise
    if r.status >= 400:
        raise RuntimeError(f"HTTP {r.status}: {body}")
    sid = r.getheader("Mcp-Session-Id")
    if "data: " in body:
        body = [l[6:] for l in body.splitlines() if l.startswith("data: ")][-1]
    return sid, json.loads(body)


def session(path):
    sid, r = post(path, None, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                          "clientInfo": {"name": "bench", "version": "1"}}})
    assert "result" in r, r
    return sid


def tool(path, sid, name, args, n=[0]):
    n[0] += 1
    _, r = post(path, sid, {"jsonrpc": "2.0", "id": n[0], "method": "tools/call",
                            "params": {"name": name, "arguments": args}})
    res = r.get("result", {})
    if res.get("isError"):
        raise RuntimeError(f"{name}: {res['content'][0]['text']}")
    return res.get("structuredContent")


FORKER = []


def fork(name):
    if not FORKER:
        FORKER.append(session("/mcp"))
    return tool("/mcp", FORKER[0], "fork", {"name": name})["endpoint"]


def end(path, sid):
    headers = {"Mcp-Session-Id": sid, "Authorization": "Bearer " + TOKEN}
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", headers=headers, method="DELETE"),
                           timeout=30).read()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])


if MODE == "run":
    n, seconds = int(sys.argv[4]), float(sys.argv[5])
    stamp = int(time.time() * 1000) % 10**9
    endpoints = [fork(f"b{stamp}-{n}-{i}") for i in range(n)]
    start = time.monotonic() + 0.5
    stop = start + seconds

    # One process per agent (fork): threads of one interpreter would add
    # the client's own lock (the GIL) to every latency measured.
    def agent(path, i, results):
        lat = {"edit": [], "exec": [], "snapshot": [], "diff": []}
        errors = []
        os.nice(int(os.environ.get("AGENT_NICE", "0")))
        sid = session(path)
        k = 0
        while time.monotonic() < start:
            time.sleep(0.01)
        while time.monotonic() < stop:
            k += 1
            for op, name, args in (("edit", "exec", {"command": f"echo {k} >> /root/notes-{i}", "snapshot": False}),
                                   ("exec", "exec", {"command": "ls /usr/bin > /dev/null"}),
                                   ("snapshot", "snapshot", {"message": f"step {k}", "allow_empty": True}),
                                   ("diff", "diff", {"from": "HEAD~1", "to": "HEAD"})):
                t = time.monotonic()
                try:
                    tool(path, sid, name, args)
                except Exception as e:  # noqa: BLE001
                    errors.append(str(e))
                    end(path, sid)
                    results.put((lat, errors))
                    return
                lat[op].append((time.monotonic() - t) * 1000)
        end(path, sid)
        results.put((lat, errors))

    # The probe: reads only, paced, so that it measures what a read waits
    # for and adds little load of its own.
    def probe(path, results):
        lat = {"probe": []}
        errors = []
        sid = session(path)
        tool(path, sid, "exec", {"command": "echo probe > /root/probe"})
        while time.monotonic() < start:
            time.sleep(0.01)
        while time.monotonic() < stop:
            t = time.monotonic()
            try:
                if PROBE == "ping":
                    post(path, sid, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
                else:
                    tool(path, sid, "diff", {"from": "HEAD~1", "to": "HEAD"})
            except Exception as e:  # noqa: BLE001
                errors.append(str(e))
                break
            lat["probe"].append((time.monotonic() - t) * 1000)
            time.sleep(0.005)
        end(path, sid)
        results.put((lat, errors))

    probe_path = fork(f"p{stamp}-{n}")
    results = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=agent, args=(p, i, results)) for i, p in enumerate(endpoints)]
    procs.append(multiprocessing.Process(target=probe, args=(probe_path, results)))
    for pr in procs:
        pr.start()
    lat = {"edit": [], "exec": [], "snapshot": [], "diff": [], "probe": []}
    errors = []
    for _ in procs:
        part, errs = results.get()
        for op, xs in part.items():
            lat[op] += xs
        errors += errs
    for pr in procs:
        pr.join()
    total = sum(len(v) for op, v in lat.items() if op != "probe")
    out = {"n": n, "seconds": seconds, "ops": total, "ops_per_s": total / seconds, "errors": errors[:3]}
    for op, xs in lat.items():
        out[op] = {"count": len(xs), "p50_ms": round(pct(xs, 50), 2), "p99_ms": round(pct(xs, 99), 2)}
    print(json.dumps(out))
else:
    k, pid = int(sys.argv[4]), int(sys.argv[5])
    time.sleep(1)
    before = rss_kb(pid)
    stamp = int(time.time() * 1000) % 10**9
    sessions = []
    for i in range(k):
        path = fork(f"idle{stamp}-{i}")
        sessions.append(session(path))
    time.sleep(1)
    after = rss_kb(pid)
    print(json.dumps({"idle_workspaces": k, "rss_before_kb": before, "rss_after_kb": after,
                      "rss_per_workspace_kb": round((after - before) / k, 1)}))
