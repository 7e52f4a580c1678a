#!/usr/bin/env python3
"""Replays agent tasks through `agentenv mcp` (JSON-RPC over stdio) and
counts what a model pays: the tokens (characters / 4) of each tool call's
request (name and arguments) and of the text content it reads back, and
the calls per task. Each task has a plan for the tools of an older binary
(no file tools: files through exec or resources) and one for the current
tools. Usage: toolbox_bench.py OLD_BIN NEW_BIN [--json]
(bench/toolbox_bench.sh runs it on a busybox tree)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

BUSYBOX_APPLETS = ["sh", "echo", "cat", "sleep", "ls", "printf", "mkdir", "head", "grep", "sed", "wc", "true",
                   "false", "test", "find", "rm", "cp", "touch", "tail", "diff", "sort", "env"]


def make_tree(src):
    for d in ["bin", "proc", "dev", "sys", "etc/app", "tmp", "root", "run", "srv", "var/log"]:
        os.makedirs(os.path.join(src, d), exist_ok=True)
    shutil.copy("/bin/busybox", os.path.join(src, "bin/busybox"))
    for a in BUSYBOX_APPLETS:
        os.symlink("busybox", os.path.join(src, "bin", a))
    files = {
        "etc/hosts": "127.0.0.1 localhost\n",
        "etc/os-release": 'NAME="Bench"\nVERSION_ID="1"\n',
        "etc/app/app.conf": "mode=good\nport=8080\nworkers=4\nlog=/var/log/app.log\n",
        "etc/app/limits.conf": "max_conn=100\ntimeout=30\n",
        "srv/app.sh": "#!/bin/sh\n. /etc/app/app.conf\necho \"app on $port mode=$mode\"\n",
        "srv/test.sh": "#!/bin/sh\ngrep -q '^mode=good' /etc/app/app.conf\n",
        "srv/README": "The app: srv/app.sh reads etc/app/app.conf.\n",
    }
    for i in range(40):
        files["srv/lib/module%02d.sh" % i] = "# module %d\nvalue_%d=%d\n" % (i, i, i * 7)
    for path, content in files.items():
        full = os.path.join(src, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(content)
    os.chmod(os.path.join(src, "srv/app.sh"), 0o755)
    os.chmod(os.path.join(src, "srv/test.sh"), 0o755)


class Session:
    def __init__(self, binary, root):
        self.p = subprocess.Popen([binary, "mcp", "--root", root], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.id = 0
        self.calls = 0
        self.tokens = 0
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "toolbox-bench", "version": "1"}})
        self.list_tokens = len(json.dumps(self.request("tools/list", {})["result"], separators=(",", ":"))) // 4

    def request(self, method, params):
        self.id += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}) + "\n")
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("server ended")
            msg = json.loads(line)
            if msg.get("id") == self.id:
                return msg

    # A tool call: the request's name and arguments, and the text a model reads.
    def call(self, name, args):
        reply = self.request("tools/call", {"name": name, "arguments": args})
        result = reply.get("result", {})
        text = "".join(c.get("text", "") for c in result.get("content", []))
        self.calls += 1
        self.tokens += (len(name) + len(json.dumps(args, separators=(",", ":"))) + len(text)) // 4
        if result.get("isError"):
            raise RuntimeError("%s %s: %s" % (name, json.dumps(args), text[:300]))
        return result.get("structuredContent", {})

    # A resource read (the older tools' only way to a file at a node).
    def read(self, uri):
        reply = self.request("resources/read", {"uri": uri})
        self.calls += 1
        text = "".join(c.get("text", "") for c in reply.get("result", {}).get("contents", []))
        self.tokens += (len(uri) + len(text)) // 4
        if "error" in reply:
            raise RuntimeError("read %s: %s" % (uri, reply["error"]))
        return text

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def short(node):
    return node["short"]


# Each task: (name, old plan, new plan); a plan is a function of a Session
# that returns True when the task's goal was reached.
def t_install(s, new):
    s.call("exec", {"command": "mkdir -p /opt/tool && echo 'tool 2.1' > /opt/tool/VERSION", "session": "w"})
    if new:
        return "tool 2.1" in s.call("read_file", {"path": "opt/tool/VERSION"})["text"]
    return "tool 2.1" in s.call("exec", {"command": "cat /opt/tool/VERSION", "session": "w"})["stdout"]


def t_edit_and_test(s, new):
    if new:
        s.call("write_file", {"path": "etc/app/app.conf", "patch": "@@ -2 +2 @@\n-port=8080\n+port=9090\n"})
    else:
        s.call("exec", {"command": "sed -i 's/^port=8080/port=9090/' /etc/app/app.conf"})
    return s.call("exec", {"command": "sh /srv/app.sh"})["stdout"].startswith("app on 9090")


def t_read_config(s, new):
    if new:
        return "max_conn" in s.call("read_file", {"path": "etc/app/limits.conf"})["text"]
    return "max_conn" in s.call("exec", {"command": "cat /etc/app/limits.conf"})["stdout"]


def t_when_changed(s, new):
    if new:
        ch = s.call("file_history", {"path": "etc/app/app.conf"})["changes"]
        return len(ch) >= 2
    log = s.call("log", {})["nodes"]
    found = 0
    for n in log[:6]:  # look at each recent node's changes
        if not n["parent"]:
            continue
        d = s.call("diff", {"from": n["parent"][:12], "to": n["short"], "paths": ["etc/app/app.conf"]})
        found += d["total"] > 0
    return found >= 1


def t_compare_nodes(s, new):
    d = s.call("diff", {"from": "HEAD~2", "to": "HEAD", "patch": True})
    return "changes" in d


def t_undo_bad_step(s, new):
    s.call("exec", {"command": "rm -f /etc/app/app.conf"})
    nodes = s.call("log", {"limit": 3})["nodes"]
    s.call("rollback", {"ref": nodes[1]["short"]})
    if new:
        return "mode=" in s.call("read_file", {"path": "etc/app/app.conf"})["text"]
    return "mode=" in s.call("exec", {"command": "cat /etc/app/app.conf"})["stdout"]


def t_read_old(s, new):
    if new:
        return "port=" in s.call("read_file", {"path": "etc/app/app.conf", "ref": "HEAD~2"})["text"]
    return "port=" in s.read("agentenv://node/HEAD~2/etc/app/app.conf")


def t_list(s, new):
    if new:
        return len(s.call("list_dir", {"path": "srv", "depth": 2})["entries"]) > 3
    return "module" in s.call("exec", {"command": "ls -lR /srv"})["stdout"]


def t_search(s, new):
    if new:
        return len(s.call("search", {"pattern": "value_1[0-9]="})["matches"]) == 10
    return s.call("exec", {"command": "grep -rn 'value_1[0-9]=' /srv /etc"})["stdout"].count("\n") == 10


def t_tournament(s, new):
    r = s.call("tournament", {"candidates": ["sed -i s/^mode=.*/mode=bad/ /etc/app/app.conf",
                                             "sed -i s/^mode=.*/mode=good/ /etc/app/app.conf"],
                              "test": "sh /srv/test.sh", "jobs": 2})
    return r["applied"]


def t_bisect(s, new):
    s.call("exec", {"command": "echo workers=8 >> /etc/app/limits.conf"})
    s.call("exec", {"command": "sed -i s/^mode=.*/mode=broken/ /etc/app/app.conf"})
    s.call("exec", {"command": "echo done > /srv/DONE"})
    r = s.call("bisect", {"test": "sh /srv/test.sh", "good": "HEAD~3", "jobs": 2})
    ok = r["found"]
    s.call("rollback", {"ref": "HEAD~2"})
    return ok


def t_status(s, new):
    s.call("exec", {"command": "echo scratch > /srv/notes.txt", "snapshot": False})
    return s.call("status", {})["dirty"]


def t_orient(s, new):
    s.call("digest", {})
    return bool(s.call("head", {})["node"]["short"])


def t_server_output(s, new):
    spawned = s.call("spawn", {"command": "for i in 1 2 3; do echo tick $i; done; sleep 30"})
    job = spawned["job"]
    s.call("exec", {"command": "sleep 1"})
    if new:
        out = s.call("job_output", {"job": job})
        ok = "tick 3" in out["data"]
    else:  # the log is a host path: exec runs inside the tree and cannot read it
        s.call("ps", {})
        try:
            ok = "tick 3" in s.call("exec", {"command": "cat " + spawned["log"]})["stdout"]
        except RuntimeError:
            ok = False
    s.call("kill", {"job": job})
    return ok


def t_tag_return(s, new):
    s.call("tag", {"name": "before-upgrade"})
    s.call("exec", {"command": "echo v2 > /srv/VERSION"})
    s.call("rollback", {"ref": "before-upgrade"})
    return True


def t_workspace_try(s, new):
    ws = s.call("fork", {"name": "try"})["workspace"]["name"]
    r = s.call("exec", {"command": "sed -i s/workers=4/workers=16/ /etc/app/app.conf && sh /srv/app.sh", "workspace": ws})
    s.call("workspace_rm", {"name": ws})
    return r["exit_code"] == 0


def t_show_root(s, new):
    nodes = s.call("log", {"grep": "init"})["nodes"] if new else s.call("log", {"limit": 50})["nodes"]
    root = nodes[-1]["short"]
    return bool(s.call("show", {"ref": root})["node"])


TASKS = [
    ("install a tool and check it", t_install),
    ("edit a config and test", t_edit_and_test),
    ("read a config file", t_read_config),
    ("find when a file changed", t_when_changed),
    ("compare two nodes", t_compare_nodes),
    ("undo a bad step", t_undo_bad_step),
    ("read a file at an old node", t_read_old),
    ("list a directory tree", t_list),
    ("search the tree", t_search),
    ("run a tournament", t_tournament),
    ("bisect a breakage", t_bisect),
    ("check for unsaved changes", t_status),
    ("orient: digest and head", t_orient),
    ("start a server, read its output", t_server_output),
    ("tag, try, return", t_tag_return),
    ("try a change in a workspace", t_workspace_try),
    ("inspect the first node", t_show_root),
]


def run(binary, new):
    tmp = tempfile.mkdtemp(prefix="toolbox-bench-")
    try:
        make_tree(tmp + "/src")
        subprocess.run([binary, "init", "--root", tmp + "/repo", "--from", tmp + "/src"], check=True,
                       stdout=subprocess.DEVNULL)
        s = Session(binary, tmp + "/repo")
        rows = []
        for name, fn in TASKS:
            calls, tokens = s.calls, s.tokens
            try:
                done = bool(fn(s, new))
            except (RuntimeError, KeyError, TypeError, IndexError) as e:
                print("  %s: %s" % (name, e), file=sys.stderr)
                done = False
            rows.append({"task": name, "calls": s.calls - calls, "tokens": s.tokens - tokens, "done": done})
        s.close()
        return s.list_tokens, rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    old_bin, new_bin = sys.argv[1], sys.argv[2]
    old_list, old = run(old_bin, False)
    new_list, new = run(new_bin, True)
    if "--json" in sys.argv:
        print(json.dumps({"old": {"tools_list": old_list, "tasks": old}, "new": {"tools_list": new_list, "tasks": new}}))
        return
    print("tools/list tokens: old %d, new %d" % (old_list, new_list))
    print("%-34s %12s %12s %7s" % ("task", "old tok/calls", "new tok/calls", "ratio"))
    for o, n in zip(old, new):
        print("%-34s %7d/%-2d%s %7d/%-2d%s %6.2f" % (o["task"], o["tokens"], o["calls"], " " if o["done"] else "!",
                                                   n["tokens"], n["calls"], " " if n["done"] else "!",
                                                   n["tokens"] / max(o["tokens"], 1)))
    ot, nt = sum(r["tokens"] for r in old), sum(r["tokens"] for r in new)
    oc, nc = sum(r["calls"] for r in old), sum(r["calls"] for r in new)
    print("%-34s %7d/%-3d %7d/%-3d %6.2f" % ("total", ot, oc, nt, nc, nt / max(ot, 1)))
    print("tasks done: old %d/%d, new %d/%d" % (sum(r["done"] for r in old), len(old), sum(r["done"] for r in new), len(new)))


if __name__ == "__main__":
    main()
