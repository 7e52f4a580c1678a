#!/usr/bin/env python3
"""Read latency over MCP (Streamable HTTP) while an exec runs, against idle.

Starts `agentenv serve --listen 127.0.0.1:0 --no-capture` on a fresh busybox
repository with a few nodes, then sends 50 concurrent read requests (log,
show, diff, resource reads) from 5 sessions (a session runs at most 16 at
once) twice: with no exec running, and while another session runs `exec
sleep 10`. Prints p50/p99 of each and their ratio.

Usage: bench/mcp_concurrency.py [path to agentenv]   (default build/cli/agentenv)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

N = 50
SESSIONS = 5


def post(url, session, msg, timeout=60):
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
    req = urllib.request.Request(url, data=json.dumps(msg).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body = r.read().decode()
        sid = r.headers.get("Mcp-Session-Id")
    if body.startswith("event:") or "\ndata: " in body or body.startswith("data: "):
        body = [l[6:] for l in body.splitlines() if l.startswith("data: ")][-1]
    return sid, json.loads(body)


def open_session(url):
    sid, r = post(url, None, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                         "clientInfo": {"name": "bench", "version": "1"}}})
    assert "result" in r, r
    return sid


def reads(node):
    kinds = [
        ("tools/call", {"name": "log", "arguments": {"limit": 20}}),
        ("tools/call", {"name": "show", "arguments": {"ref": node}}),
        ("tools/call", {"name": "diff", "arguments": {"from": node, "to": "HEAD"}}),
        ("resources/read", {"uri": f"agentenv://node/{node}/etc/app.conf"}),
    ]
    return [kinds[i % len(kinds)] for i in range(N)]


def burst(url, sessions, node):
    lat = [0.0] * N
    errors = []

    def one(i, method, params):
        t = time.perf_counter()
        _, r = post(url, sessions[i % len(sessions)], {"jsonrpc": "2.0", "id": 1000 + i, "method": method, "params": params})
        lat[i] = (time.perf_counter() - t) * 1000
        if "result" not in r or r["result"].get("isError"):
            errors.append(r)

    threads = [threading.Thread(target=one, args=(i, m, p)) for i, (m, p) in enumerate(reads(node))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"read failed: {errors[0]}")
    lat.sort()
    return lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]


def main():
    bin = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/cli/agentenv")
    tmp = tempfile.mkdtemp(prefix="agentenv-mcpbench-")
    serve = None
    try:
        src = os.path.join(tmp, "src")
        for d in ["bin", "proc", "dev", "sys", "etc", "tmp", "root", "run"]:
            os.makedirs(os.path.join(src, d))
        shutil.copy("/bin/busybox", os.path.join(src, "bin/busybox"))
        for a in ["sh", "sleep", "echo"]:
            os.symlink("busybox", os.path.join(src, "bin", a))
        open(os.path.join(src, "etc/app.conf"), "w").write("mode=good\n")
        root = os.path.join(tmp, "repo")
        subprocess.run([bin, "init", "--root", root, "--from", src], check=True, capture_output=True)
        for i in range(5):
            open(os.path.join(root, "work/current/etc/app.conf"), "w").write(f"mode={i}\n")
            subprocess.run([bin, "snap", "--root", root, "-m", f"step {i}"], check=True, capture_output=True)
        log = open(os.path.join(tmp, "serve.log"), "w+")
        serve = subprocess.Popen([bin, "serve", "--root", root, "--no-capture", "--listen", "127.0.0.1:0"], stderr=log)
        url = None
        for _ in range(100):
            log.seek(0)
            m = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", log.read())
            if m:
                url = m.group(1)
                break
            time.sleep(0.1)
        assert url, "serve printed no URL"
        readers = [open_session(url) for _ in range(SESSIONS)]
        _, r = post(url, readers[0], {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                   "params": {"name": "log", "arguments": {"limit": 3}}})
        node = r["result"]["structuredContent"]["nodes"][2]["short"]
        burst(url, readers, node)  # warm up
        idle = burst(url, readers, node)

        runner = open_session(url)
        done = {}

        def long_exec():
            done["r"] = post(url, runner, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                           "params": {"name": "exec", "arguments": {"command": "sleep 10", "snapshot": False}}})

        t = threading.Thread(target=long_exec)
        t.start()
        time.sleep(1)
        busy = burst(url, readers, node)
        still_running = t.is_alive()
        t.join()
        assert still_running, "the exec ended before the burst did: the burst measured nothing"
        print(f"MCP over HTTP, {N} concurrent reads (log/show/diff/resources/read) from {SESSIONS} sessions, {os.cpu_count()} cores, "
              f"load {os.getloadavg()[0]:.2f}")
        print(f"{'':24} {'p50 ms':>8} {'p99 ms':>8}")
        print(f"{'no exec running':24} {idle[0]:8.1f} {idle[1]:8.1f}")
        print(f"{'during exec sleep 10':24} {busy[0]:8.1f} {busy[1]:8.1f}")
        print(f"{'ratio':24} {busy[0] / idle[0]:8.2f} {busy[1] / idle[1]:8.2f}")
    finally:
        if serve:
            serve.terminate()
            serve.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
