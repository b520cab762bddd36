#!/usr/bin/env python3
"""Whose are the allocator's and the reference counts' samples? A `perf record --call-graph dwarf` profile of the
gateway, read by caller (frame-pointer stacks cannot say: glibc's malloc and free use the frame pointer as a
register, so the unwinder loses every caller above them).

    # while the load test drains its backlog (Benchmarks/README.md, "Whose allocations"):
    perf record --call-graph dwarf,16384 -F 199 -p "$(pgrep -f push-gateway | head -1)" -o /tmp/dwarf.data -- sleep 6
    perf script -i /tmp/dwarf.data -F comm,tid,ip,sym,dso > /tmp/dwarf.txt
    python3 Benchmarks/perf-callers.py /tmp/dwarf.txt --binary push-gateway --mode alloc      # malloc/free by caller
    python3 Benchmarks/perf-callers.py /tmp/dwarf.txt --binary push-gateway --mode rc --depth 3
    python3 Benchmarks/perf-callers.py /tmp/dwarf.txt --binary push-gateway --mode inclusive  # per function
    python3 Benchmarks/perf-callers.py /tmp/dwarf.txt --binary push-gateway --mode threads    # per thread, kernel

- `alloc`, `rc`: the samples whose leaf is the allocator (`malloc`, `free` and their helpers) or `swift_retain` /
  `swift_release`, each counted for the nearest frames (`--depth`) in `--binary`, demangled.
- `inclusive`: every function of `--binary` by the share of samples it is on the stack of.
- `threads`: samples per thread name, and how many of them were in the kernel (by syscall).
"""
import argparse
import collections
import re
import subprocess

FRAME = re.compile(r"\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")
LEAVES = {
    "alloc": re.compile(r"malloc|free|^_int_|calloc|realloc|consolidate|unlink_chunk|tcache"),
    "rc": re.compile(r"^swift_(retain|release)"),
}


def samples(path):
    """(thread name, [(symbol, dso)] leaf first) per sample of `perf script -F comm,tid,ip,sym,dso`."""
    header, stack = None, []
    with open(path, errors="replace") as lines:
        for line in lines:
            if not line.strip():
                if stack:
                    yield header, stack
                header, stack = None, []
            elif line[0] in "\t ":
                match = FRAME.match(line)
                if match:
                    stack.append((re.sub(r"\+0x[0-9a-f]+$", "", match.group(1)), match.group(2)))
            else:
                header = line.split()[0] if line.split() else "?"
    if stack:
        yield header, stack


def demangled(names):
    try:
        out = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(names), capture_output=True,
                             text=True, timeout=60).stdout.splitlines()
        return out if len(out) == len(names) else names
    except (OSError, subprocess.SubprocessError):
        return names


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("script", help="the output of perf script -F comm,tid,ip,sym,dso")
    ap.add_argument("--binary", default="push-gateway", help="a part of the gateway binary's path")
    ap.add_argument("--mode", choices=["alloc", "rc", "inclusive", "threads"], default="alloc")
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    counts, kernel, total, matched = collections.Counter(), collections.Counter(), 0, 0
    for thread, stack in samples(args.script):
        total += 1
        if args.mode == "threads":
            counts[thread] += 1
            calls = [s for s, dso in stack if "kernel" in dso and s.startswith("__x64_sys_")]
            if any("kernel" in dso for _, dso in stack):
                kernel[(thread, calls[0] if calls else "other")] += 1
            continue
        if args.mode == "inclusive":
            for name in {s for s, dso in stack if args.binary in dso}:
                counts[name] += 1
            continue
        if not LEAVES[args.mode].search(stack[0][0]):
            continue
        matched += 1
        ours = [s for s, dso in stack[1:] if args.binary in dso]
        counts[" <- ".join(ours[:args.depth]) if ours else "(no frame of the binary)"] += 1
    base = total if args.mode in ("inclusive", "threads") else max(matched, 1)
    print(f"samples: {total}" + ("" if args.mode in ("inclusive", "threads") else f", {args.mode} leaves: {matched}"))
    top = counts.most_common(args.top)
    names = [k for k, _ in top] if args.mode == "threads" else demangled([k for k, _ in top])
    for (_, n), name in zip(top, names):
        print(f"{n:6d} {100 * n / base:5.1f}%  {name[:200]}")
    if args.mode == "threads":
        print("in the kernel, by thread and syscall:")
        for (thread, call), n in kernel.most_common(args.top):
            print(f"{n:6d} {100 * n / total:5.1f}%  {thread} {call}")


if __name__ == "__main__":
    main()
