#!/usr/bin/env python3
"""Reads a memcheck XML file (argv[1]) of a BEAM run and fails if an error
that is a real memory error (see test/valgrind/run) has a libnifsock.so frame
among its top four frames."""
import sys, re, collections, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
always = {"InvalidFree", "MismatchedFree", "Overlap", "InvalidJump", "InvalidMemPool"}
access = {"InvalidRead", "InvalidWrite", "SyscallParam"}
real_where = re.compile(r"free'd|after a block|before a block|not stack'd")
inside_alloc = re.compile(r"inside a block of size [0-9,]+ alloc'd")
bad, noise = collections.Counter(), collections.Counter()
examples = {}
for e in root.findall("error"):
    kind = e.findtext("kind")
    frames = e.find("stack").findall("frame")
    objs = [f.findtext("obj") or "" for f in frames]
    fns = [f.findtext("fn") or "?" for f in frames]
    ours = [i for i, o in enumerate(objs) if "libnifsock" in o]
    where = " ".join(a.text or "" for a in e.findall("auxwhat")) + " " + (e.findtext("what") or "")
    real = kind in always or (kind in access and (
        real_where.search(where) or ("unaddressable" in where and not inside_alloc.search(where))))
    if ours and ours[0] <= 3 and real:
        key = (kind, tuple(fns[:4]))
        bad[key] += 1
        examples.setdefault(key, (where.strip(), [f"{fn} ({o.rsplit('/', 1)[-1]})" for fn, o in zip(fns, objs)][:10]))
    else:
        noise[kind + (" via nifsock" if ours else "")] += 1
print("ignored (JIT stack-switching artefacts and ERTS):", dict(noise))
if bad:
    print("memcheck errors in nifsock frames:")
    for k, n in bad.most_common():
        print(f"  {n} x {k[0]}: {examples[k][0]}")
        for fr in examples[k][1]:
            print("       ", fr)
    sys.exit(1)
print("no use-after-free, out-of-bounds access, bad free or overlap in libnifsock.so frames")
