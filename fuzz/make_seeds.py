#!/usr/bin/env python3
"""Writes the seed inputs of the archive, layout and text targets into
fuzz/corpus/<target>/ (fuzz_seeds, built from make_seeds.cc, writes the
binary store formats). Deterministic: fixed names, times and owners.

    fuzz/make_seeds.py [CORPUS_DIR]   (default: fuzz/corpus beside this file)

Archives are trimmed after their end-of-archive blocks (the rest is padding)
so that the corpus stays small; GNU tar writes the sparse seeds."""

import gzip
import io
import json
import lzma
import os
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")
MTIME = 1795176000  # 2026-11-20 12:00 UTC


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def trim(tar):
    """The archive up to its two zero blocks (tar pads to 10 KiB)."""
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.getmembers()
        end = t.offset
    return tar[:end + 1024]


# An entry: (name, type, extra) with type one of file, dir, symlink,
# hardlink, fifo, char; extra is the content, the link target or the device.
def tar(entries, fmt=tarfile.PAX_FORMAT, pax=None):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for e in entries:
            name, kind = e[0], e[1]
            extra = e[2] if len(e) > 2 else b""
            info = tarfile.TarInfo(name)
            info.mtime = e[3] if len(e) > 3 else MTIME
            info.uid, info.gid, info.uname, info.gname = 0, 0, "", ""
            info.mode = 0o755 if kind == "dir" else 0o644
            if pax and name in pax:
                info.pax_headers = pax[name]
            data = None
            if kind == "file":
                data = extra if isinstance(extra, bytes) else extra.encode()
                info.size = len(data)
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, extra
            elif kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, extra
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            elif kind == "char":
                info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return trim(buf.getvalue())


def zstd(data):
    return subprocess.run(["zstd", "-q", "-c", "-3"], input=data, stdout=subprocess.PIPE, check=True).stdout


def gnu_tar(fmt):
    """A GNU tar archive of a sparse file, a long name and a hardlink."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "src")
        os.makedirs(os.path.join(src, "dir"))
        with open(os.path.join(src, "sparse"), "wb") as f:
            f.seek(65536)
            f.write(b"end")
            f.truncate(200000)
        long = os.path.join(src, "dir", "n" * 120)
        with open(long, "w") as f:
            f.write("long name\n")
        os.link(long, os.path.join(src, "hard"))
        for root, dirs, files in os.walk(src):
            for n in dirs + files:
                os.utime(os.path.join(root, n), (MTIME, MTIME), follow_symlinks=False)
        os.utime(src, (MTIME, MTIME))
        # No pid in pax header names, no atime or ctime: the same bytes every run.
        pax = ["--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime"] if fmt == "posix" else []
        out = subprocess.run(["tar", "-C", src, "--sparse", "--format=" + fmt, "--numeric-owner", "--owner=0",
                              "--group=0", "--sort=name"] + pax + ["-cf", "-", "."],
                             stdout=subprocess.PIPE, check=True).stdout
        return trim(fix_sparse_name(out))


def fix_sparse_name(tar):
    """GNU tar names a pax sparse file's header GNUSparseFile.<pid>: make it 0."""
    out = bytearray(tar)
    for at in range(0, len(out) - 511, 512):
        name = bytes(out[at:at + 100]).split(b"\0")[0]
        if b"GNUSparseFile." not in name:
            continue
        head, rest = name.split(b"GNUSparseFile.", 1)
        fixed = head + b"GNUSparseFile.0" + rest[rest.index(b"/"):]
        out[at:at + 100] = fixed.ljust(100, b"\0")
        out[at + 148:at + 156] = b" " * 8
        out[at + 148:at + 156] = b"%06o\0 " % sum(out[at:at + 512])
    return bytes(out)


def tars():
    times = {
        "./": {"mtime": "-1.000000001"},
        "etc/hostname": {"mtime": "-2.999999999", "atime": "-0.5", "SCHILY.xattr.user.kind": "name",
                         "SCHILY.acl.access": "user::rw-,group::r--,other::r--"},
        "etc/motd": {"mtime": "1795176000.123456789"},
    }
    basic = tar([("./", "dir"), ("etc", "dir"), ("etc/hostname", "file", "box\n"), ("etc/motd", "file", "hi\n"),
                 ("etc/link", "symlink", "hostname"), ("etc/hard", "hardlink", "etc/hostname"),
                 ("run", "dir"), ("run/fifo", "fifo"), ("dev", "dir"), ("dev/null", "char"),
                 ("usr/share/doc/" + "d" * 90 + "/" + "f" * 60, "file", "a long pax path\n")], pax=times)
    put("tar_import", "pax", basic)
    put("tar_import", "pax.gz", gzip.compress(basic, mtime=0))
    put("tar_import", "pax.xz", lzma.compress(basic))
    put("tar_import", "pax.zst", zstd(basic))
    put("tar_import", "ustar", tar([("bin", "dir"), ("bin/sh", "file", "#!\n"), ("bin/ln", "hardlink", "bin/sh")],
                                   fmt=tarfile.USTAR_FORMAT))
    put("tar_import", "gnu-sparse", gnu_tar("gnu"))
    put("tar_import", "posix-sparse", gnu_tar("posix"))
    put("tar_import", "dotdot", tar([("a", "dir"), ("a/../../escape", "file", "x")]))
    put("tar_import", "absolute", tar([("/etc/evil", "file", "x")]))
    put("tar_import", "hardlink-out", tar([("x", "hardlink", "../outside")]))
    put("tar_import", "through-symlink", tar([("s", "symlink", "/tmp"), ("s/x", "file", "x")]))
    put("tar_import", "twice", tar([("f", "file", "1"), ("f", "file", "2")]))
    put("tar_import", "root-file", tar([("./", "file", "x")]))
    return basic


def raw_tar(entries):
    """A tar built header by header, for what no writer makes: entries are
    (name, type, data, link); type "x" is a pax header with data as its body."""
    out = b""
    for name, typ, data, link in entries:
        h = bytearray(512)
        h[0:len(name)] = name
        h[100:108] = b"%07o\0" % (0o755 if typ == b"5" else 0o644)
        h[108:116] = h[116:124] = b"%07o\0" % 0
        h[124:136] = b"%011o\0" % len(data)
        h[136:148] = b"%011o\0" % MTIME
        h[156:157] = typ
        h[157:157 + len(link)] = link
        h[257:265] = b"ustar\x0000"
        h[148:156] = b" " * 8
        h[148:156] = b"%06o\0 " % sum(h)
        out += bytes(h) + data + b"\0" * (-len(data) % 512)
    return out + b"\0" * 1024


def pax_record(key, value):
    body = key + b"=" + value + b"\n"
    n = len(body) + 2
    while len(str(n)) + 1 + len(body) != n:
        n += 1
    return str(n).encode() + b" " + body


def hostile():
    """Archives GNU tar refuses and libarchive read leniently, and a sparse
    entry whose holes no archive may have."""
    sparse = (pax_record(b"GNU.sparse.major", b"1") + pax_record(b"GNU.sparse.minor", b"0") +
              pax_record(b"GNU.sparse.name", b"big") + pax_record(b"GNU.sparse.realsize", b"1099511627776"))
    put("tar_import", "sparse-1tib", raw_tar([(b"PaxHeader/big", b"x", sparse, b""),
                                              (b"GNUSparseFile.0/big", b"0", b"1\n0\n0\n".ljust(512, b"\0"), b"")]))
    for name, body in [("pax-length-past-end", b"999999 path=zz\n"), ("pax-length-zero", b"0 path=zz\n"),
                       ("pax-length-negative", b"-5 path=zz\n"), ("pax-length-not-digits", b"abc path=zz\n"),
                       ("pax-length-wrong", b"10 path=zz\n"), ("pax-uid-not-number", b"11 uid=abc\n")]:
        stream = raw_tar([(b"PaxHeader/f", b"x", body, b""), (b"f", b"0", b"hi\n", b"")])
        put("tar_import", name, stream)
        put("tar_filter", name, b"\x03" + stream)
    link = raw_tar([(b"PaxHeader/h", b"x", pax_record(b"linkpath", b"/etc/shadow"), b""), (b"h", b"1", b"", b"")])
    put("tar_import", "pax-linkpath-out", link)
    put("tar_filter", "pax-linkpath", b"\x02" + link)
    put("tar_filter", "link-no-target", b"\x00" + raw_tar([(b"h", b"1", b"", b""), (b"s", b"2", b"", b"")]))
    # A name that is not UTF-8 with the hdrcharset libarchive writes for it.
    put("tar_filter", "hdrcharset", b"\x06" + raw_tar([
        (b"PaxHeader/caf\xe9", b"x", pax_record(b"hdrcharset", b"BINARY") + pax_record(b"path", b"caf\xe9") +
         pax_record(b"mtime", b"-2.5"), b""), (b"caf\xe9", b"0", b"x", b"")]))
    # What tar tools accept with a warning: a leading '/', a name appended
    # again, directories left implicit, ACL entries named without ids.
    put("tar_import", "leading-slash", raw_tar([(b"/etc/a", b"0", b"a", b""), (b"/etc/h", b"1", b"", b"/etc/a")]))
    put("tar_import", "appended", raw_tar([(b"f", b"0", b"1", b""), (b"d", b"5", b"", b""), (b"f", b"0", b"2", b""),
                                           (b"d", b"5", b"", b""), (b"d/x", b"0", b"x", b""), (b"d", b"0", b"f", b"")]))
    put("tar_import", "implied-dirs", raw_tar([(b"a/b/c/f", b"0", b"f", b""), (b"a/b", b"5", b"", b"")]))
    put("tar_import", "acl-names", raw_tar([(b"PaxHeader/f", b"x", pax_record(
        b"SCHILY.acl.access", b"user::rw-,user:lp:rw-:4242,group::r--,group:daemon:r--,mask::rw-,other::r--") +
        pax_record(b"uname", b"nobody") + pax_record(b"uid", b"32757"), b""), (b"f", b"0", b"f", b"")]))
    put("tar_filter", "pax-nul-tail", b"\x04" + raw_tar([(b"PaxHeader/f", b"x", pax_record(b"path", b"g") + b"\0junk", b""),
                                                         (b"f", b"0", b"", b"")]))


def layers():
    put("oci_layer", "whiteouts", tar([("etc", "dir"), ("etc/.wh.passwd", "file"), ("etc/new", "file", "new\n"),
                                       ("usr/bin/.wh.tool", "file"), (".wh.fifo", "file")]))
    put("oci_layer", "opaque", tar([("etc", "dir"), ("etc/.wh..wh..opq", "file"), ("etc/only", "file", "o\n")]))
    put("oci_layer", "replace", tar([("d", "file", "was a dir\n"), ("f", "dir"), ("f/inside", "file", "i\n"),
                                     ("usr/bin/tool", "symlink", "../../f/inside"),
                                     ("newhard", "hardlink", "etc/passwd")]))
    put("oci_layer", "through-link", tar([("link/.wh.passwd", "file")]))
    put("oci_layer", "through-abs", tar([("abs/.wh.keep", "file"), ("abs/.wh..wh..opq", "file")]))
    put("oci_layer", "opaque-root", tar([(".wh..wh..opq", "file"), ("kept", "file", "k\n")]))
    put("oci_layer", "gz", gzip.compress(tar([("etc/.wh.conf.d", "file"), ("etc/x", "file", "x\n")]), mtime=0))


def layout(tag, index, blobs, oci_layout='{"imageLayoutVersion":"1.0.0"}'):
    parts = [tag.encode(), oci_layout.encode(), index.encode()] + [b if isinstance(b, bytes) else b.encode() for b in blobs]
    return b"\n%%\n".join(parts)


MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"


def desc(media, n, **extra):
    d = '{"mediaType":"%s","digest":"@D%d","size":@S%d' % (media, n, n)
    if extra.get("annotations"):
        d += ',"annotations":' + json.dumps(extra["annotations"])
    if extra.get("platform"):
        d += ',"platform":' + json.dumps(extra["platform"])
    return d + "}"


def index(*descs):
    return '{"schemaVersion":2,"manifests":[%s]}' % ",".join(descs)


def manifest(config, layers, media=MANIFEST, layer_media=LAYER, annotations=None):
    ls = ",".join(desc(layer_media, n, annotations=(annotations or {}).get(n)) for n in layers)
    return '{"schemaVersion":2,"mediaType":"%s","config":%s,"layers":[%s]}' % (media, desc(CONFIG, config), ls)


def config(diff_ids):
    return '{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[%s]}}' % ",".join(
        '"@D%d"' % n for n in diff_ids)


def layouts(base):
    ref = {"org.opencontainers.image.ref.name": "t"}
    lower = tar([("etc", "dir"), ("etc/passwd", "file", "root\n"), ("etc/conf.d", "dir"), ("etc/conf.d/a", "file", "a"),
                 ("bin", "dir"), ("bin/sh", "file", "sh"), ("bin/ln", "hardlink", "bin/sh")])
    upper = tar([("etc/.wh.passwd", "file"), ("etc/conf.d/.wh..wh..opq", "file"), ("etc/conf.d/b", "file", "b"),
                 (".wh.bin", "file")])
    put("oci_layout", "one-layer", layout("t", index(desc(MANIFEST, 0, annotations=ref)),
                                          [manifest(1, [2]), config([2]), lower]))
    put("oci_layout", "untagged", layout("", index(desc(MANIFEST, 0)), [manifest(1, [2]), config([2]), base]))
    put("oci_layout", "two-layers", layout("t", index(desc(MANIFEST, 0, annotations=ref)),
                                           [manifest(1, [2, 3]), config([2, 3]), lower, upper]))
    history = {2: {"dev.agentenv.node": "a" * 64, "dev.agentenv.time": "1795176000000000000",
                   "dev.agentenv.root": "755 0 0 1795176000000000000", "dev.agentenv.message": "init",
                   "dev.agentenv.label": "+5"},
               3: {"dev.agentenv.node": "b" * 64, "dev.agentenv.parent": "a" * 64,
                   "dev.agentenv.time": "1795179600000000000", "dev.agentenv.root": "700 0 0 -1500000000",
                   "dev.agentenv.message": "", "dev.agentenv.label": "-1 etc/passwd"}}
    put("oci_layout", "history", layout("t", index(desc(MANIFEST, 0, annotations=ref)),
                                        [manifest(1, [2, 3], annotations=history), config([2, 3]), lower, upper]))
    platforms = index(desc("application/vnd.oci.image.index.v1+json", 0, annotations=ref))
    nested = index(desc(MANIFEST, 1, platform={"os": "linux", "architecture": "arm64"}),
                   desc(MANIFEST, 1, platform={"os": "linux", "architecture": "amd64"}))
    put("oci_layout", "nested-index", layout("t", platforms, [nested, manifest(2, [3]), config([3]), lower]))
    docker = index(desc("application/vnd.docker.distribution.manifest.v2+json", 0, annotations=ref))
    put("oci_layout", "docker-gzip", layout("t", docker, [
        manifest(1, [2], media="application/vnd.docker.distribution.manifest.v2+json",
                 layer_media="application/vnd.docker.image.rootfs.diff.tar.gzip"),
        config([3]), gzip.compress(lower, mtime=0), lower]))
    put("oci_layout", "zstd", layout("t", index(desc(MANIFEST, 0, annotations=ref)),
                                     [manifest(1, [2], layer_media=LAYER + "+zstd"), config([3]), zstd(lower), lower]))
    two = index(desc(MANIFEST, 0, annotations=ref),
                desc(MANIFEST, 0, annotations={"org.opencontainers.image.ref.name": "u"}))
    put("oci_layout", "two-tags", layout("u", two, [manifest(1, [2]), config([2]), lower]))
    # The layer's blob is a symlink to a file outside the layout holding its
    # bytes (oci_layout_fuzzer.cc: "@LINK\n"): it must never be followed.
    put("oci_layout", "symlinked-blob", layout("t", index(desc(MANIFEST, 0, annotations=ref)),
                                               [manifest(1, [2]), config([2]), b"@LINK\n" + lower]))


def texts():
    lines = [
        {"id": 1, "op": "log", "args": {"limit": 5}},
        {"id": "s", "op": "show", "args": {"ref": "HEAD~1"}},
        {"id": 3, "op": "diff", "args": {"from": "good", "to": "v1.0", "patch": True, "paths": ["etc"]}},
        {"id": 4, "op": "diff", "args": {}},
        {"id": 5, "op": "head"},
        {"id": 6, "op": "branches", "args": None},
        {"id": 7, "op": "tag", "args": {}},
        {"id": 8, "op": "status"},
        {"id": 9, "op": "exec", "args": {"argv": ["true"], "timeout_s": 1.5, "env": {"A": "b"}, "session": "s"}},
        {"id": 10, "op": "rollback", "args": {"ref": "@{10 minutes ago}", "paths": ["etc/app.conf"]}},
        {"id": 11, "op": "snap", "args": {"message": "m", "timeout": 3}},
        {"id": 12, "op": "tournament", "args": {"test": "true", "candidates": ["a", "b"], "jobs": -1}},
        {"id": 13, "op": "nope"},
        {"id": 14, "op": "ps"},
        {"id": 15, "op": "kill", "args": {"job": 1}},
    ]
    put("socket", "ops", "\n".join(json.dumps(l) for l in lines) + "\n")
    put("socket", "malformed", 'not json\n{}\n[1,2]\n{"op":7}\n   \n{"op":"log","args":[]}\n{"op":"log","args":{"limit":"x"}}')
    put("socket", "one", '{"id":1,"op":"show","args":{"ref":"side"}}')
    rpc = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": "log", "arguments": {"limit": 2}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "exec", "arguments": {"command": "ls"}}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "show", "arguments": None}},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "nope"}},
        {"jsonrpc": "2.0", "id": 7, "method": "ping"},
        {"jsonrpc": "2.0", "id": 8, "method": "resources/list"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        {"jsonrpc": "2.0", "result": {}, "id": 9},
    ]
    put("mcp", "session", "\n".join(json.dumps(l) for l in rpc) + "\n")
    put("mcp", "malformed", '{\n[]\n{"id":null,"method":"ping"}\n{"id":1,"method":3}\n\n')
    put("ignore", "rules", "# comment\n/srv/cache\n**/*.pyc\n!**/keep.pyc\nbuild/\n**/node_modules/**\n"
                           "a/**/b/*.[ch]\n\\#literal\ntrailing\\ \n[!a-c]?x\n\0"
                           "srv/cache/x\nsrc/a.pyc\nsrc/keep.pyc\nbuild/\nbuild\nx/node_modules/y/z\na/q/r/b/f.c\n#literal\n")
    put("ignore", "bad", "ok\n[unterminated\n\0a\n")
    put("ignore", "escapes", "\\!bang\n\\\\\n**\n/\n!\n*/**/\n\0!bang\n\\\na/b\n")
    for name, ref in [("head", "HEAD"), ("tilde", "HEAD~2"), ("caret", "v1.0^"), ("tag", "good"),
                      ("ago", "@{10 minutes ago}"), ("date", "@{2026-11-20 13:30}"), ("day", "@{2026-11-21}"),
                      ("now", "@{now}"), ("prefix", "abcd"), ("chain", "side~1~1"), ("caret-n", "HEAD^2")]:
        put("refs", name, ref)


def tar_filter(basic):
    put("tar_filter", "pax", b"\x05" + basic)
    put("tar_filter", "gnu-sparse", b"\x01" + gnu_tar("gnu"))
    put("tar_filter", "value", b"\x00-2.999999999")


def main():
    base = tars()
    layers()
    layouts(base)
    texts()
    tar_filter(base)
    hostile()


main()
