#!/usr/bin/env python3
"""What dominates a wasm binary: code bytes per crate, from the function bodies and the `name`
section (so run it on a build that still has names, i.e. before `wasm-opt --strip-debug`).

usage: tools/wasm_size.py pkg/pianoformer_bg.wasm [top-N]
"""
import re
import sys
from collections import Counter


def leb(buf, i):
    result = shift = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return result, i


def sections(buf):
    i = 8
    while i < len(buf):
        sid = buf[i]
        size, j = leb(buf, i + 1)
        yield sid, buf[j:j + size]
        i = j + size


def main(path, top):
    buf = open(path, "rb").read()
    imported = 0
    bodies = []
    names = {}
    section_sizes = Counter()
    for sid, data in sections(buf):
        if sid == 0:
            n, k = leb(data, 0)
            cname = data[k:k + n].decode(errors="replace")
            section_sizes[f"custom:{cname}"] += len(data)
            if cname == "name":
                k += n
                while k < len(data):
                    sub, k = leb(data, k)
                    size, k = leb(data, k)
                    if sub == 1:
                        count, m = leb(data, k)
                        for _ in range(count):
                            idx, m = leb(data, m)
                            ln, m = leb(data, m)
                            names[idx] = data[m:m + ln].decode(errors="replace")
                            m += ln
                    k += size
            continue
        section_sizes[{1: "type", 2: "import", 3: "function", 7: "export", 10: "code",
                       11: "data"}.get(sid, f"section {sid}")] += len(data)
        if sid == 2:
            count, k = leb(data, 0)
            for _ in range(count):
                for _ in range(2):
                    ln, k = leb(data, k)
                    k += ln
                kind = data[k]
                k += 1
                if kind == 0:
                    _, k = leb(data, k)
                    imported += 1
                elif kind == 1:
                    k += 1
                    flags, k = leb(data, k)
                    _, k = leb(data, k)
                    if flags & 1:
                        _, k = leb(data, k)
                elif kind == 2:
                    flags, k = leb(data, k)
                    _, k = leb(data, k)
                    if flags & 1:
                        _, k = leb(data, k)
                else:
                    k += 2
        if sid == 10:
            count, k = leb(data, 0)
            for _ in range(count):
                size, k = leb(data, k)
                bodies.append(size)
                k += size
    total = len(buf)
    print(f"{path}: {total / 2**20:.1f} MiB")
    for name, size in section_sizes.most_common():
        print(f"  {name:24} {size / 2**20:7.2f} MiB")
    by_crate = Counter()
    for i, size in enumerate(bodies):
        name = names.get(imported + i, "?")
        m = re.search(r"(?:_ZN|^<?)(?:\d+)?([a-z_][a-z0-9_]*)", name)
        crate = m.group(1) if m else "?"
        by_crate[crate] += size
    print(f"code by crate (top {top}):")
    for crate, size in by_crate.most_common(top):
        print(f"  {crate:28} {size / 2**20:7.2f} MiB")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20)
