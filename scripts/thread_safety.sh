#!/usr/bin/env bash
# Clang's -Wthread-safety over the project's sources: every GUARDED_BY
# member (common/mutex.h) read or written without its mutex, every
# REQUIRES function called without it, fails. Uses the compile commands of
# an existing build (scripts/build.sh makes build/compile_commands.json),
# with clang++ in place of g++ and -fsyntax-only: nothing is built.
#   scripts/thread_safety.sh [BUILD_DIR] [FILE_REGEX]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
filter=${2:-.}
clang=$(command -v clang++-14 || command -v clang++ || true)
[ -n "$clang" ] || { echo "skipped: clang++ not found (scripts/install-deps.sh installs clang-14)" >&2; exit 77; }
[ -f "$build/compile_commands.json" ] || { echo "$build/compile_commands.json: build first (scripts/build.sh)" >&2; exit 2; }
python3 - "$build/compile_commands.json" "$clang" "$filter" "$(nproc)" <<'PY'
import json, re, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
import os
db, clang, pattern, jobs = json.load(open(sys.argv[1])), sys.argv[2], re.compile(sys.argv[3]), int(sys.argv[4])
# The project's own modules, every folder with a CMakeLists.txt (as the
# include rule reads them): tests, benchmarks and fuzzers hold no shared
# state of theirs. A unit is a source of one (snap/scan.cc) or a unity
# batch of one's sources (build/snap/CMakeFiles/snap.dir/Unity/...).
root, build = os.getcwd(), os.path.realpath(os.path.dirname(sys.argv[1]))
modules = {d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "CMakeLists.txt"))} - {"tests", "bench", "fuzz"}
def module_of(f):
    f = os.path.realpath(f)
    for base in (build, root):  # the build first: it may lie inside the source tree
        rel = os.path.relpath(f, base)
        if not rel.startswith(".."):
            return rel.split(os.sep, 1)[0]
    return None
units = []
for e in db:
    f = e["file"] if os.path.isabs(e["file"]) else os.path.join(e["directory"], e["file"])
    if module_of(f) not in modules or not pattern.search(f):
        continue
    args = shlex.split(e["command"])
    keep, skip = [], False
    for a in args[1:]:
        if skip: skip = False; continue
        if a == "-o": skip = True; continue
        if a in ("-c",) or a.startswith(("-fdiagnostics-color", "-MD", "-MF", "-MT")): continue
        if a in ("-MF", "-MT"): skip = True; continue
        keep.append(a)
    units.append((f, e["directory"], [clang, "-fsyntax-only", "-Wthread-safety", "-Wthread-safety-beta",
                                      "-Werror=thread-safety", "-Wno-unknown-warning-option"] + keep))
def run(u):
    f, d, cmd = u
    p = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
    return f, p.returncode, p.stderr
bad = 0
with ThreadPoolExecutor(jobs) as ex:
    for f, rc, err in ex.map(run, units):
        if rc != 0:
            bad += 1
            sys.stderr.write(err)
print(f"thread safety: {len(units)} files checked, {bad} with findings", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
