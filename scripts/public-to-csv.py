#!/usr/bin/env python3
"""Published microbenchmarks (a public.json of measured results: categories gemm_efficiency,
memory_bandwidth, collective_bandwidth) -> one calibration CSV per device, in the format of
docs/CALIBRATION.md, written to hardware/calibration/public-<device>.csv.

    scripts/public-to-csv.py PATH/TO/public.json [OUT_DIR]

Rows (reps 0: a published number; min = max = median):
  - max achievable matmul (MAMF) and cuBLASLt/hipBLASLt GEMM sweeps: bench gemm, kind gemm,
    median_s = 2mnk / (TFLOP/s x 1e12), bytes = elem x (mk + kn) + 2mn (a 2-byte output);
  - STREAM copy / triad bandwidths: bench copy, kind elementwise, dtype bf16, variant stream;copy or
    stream;triad; the sources give no array size, so 2^28 bf16 elements per array is assumed
    (copy moves 1 GiB, triad 1.5 GiB) and each row's source says so;
  - collective sweeps and single points: bench allreduce/allgather/..., m the ranks, bytes the
    message size, median_s = bytes / algbw with algbw from busbw by the nccl-tests factors
    (allreduce 2(n-1)/n, allgather/reducescatter/alltoall (n-1)/n, broadcast 1), or the
    published time where only a time is given.
Entries or metrics that cannot be turned into a (shape, time) pair are listed on stderr."""
import json
import os
import re
import sys

# Device key -> (how a "hardware.gpu" string names it, the "# device:" line).
DEVICES = [
    ("a100", re.compile(r"A100"), "NVIDIA A100-SXM4-80GB"),
    ("h100", re.compile(r"H100"), "NVIDIA H100-SXM5-80GB"),
    ("h200", re.compile(r"H200"), "NVIDIA H200 SXM (141GB HBM3e)"),
    ("b200", re.compile(r"(?<!G)B200"), "NVIDIA B200"),
    ("mi300x", re.compile(r"MI300X"), "AMD Instinct MI300X"),
    ("mi325x", re.compile(r"MI325X"), "AMD Instinct MI325X"),
]

GEMM_DTYPES = {"bf16": ("bf16", 1 * 2), "fp16": ("fp16", 2), "fp8": ("fp8", 1), "fp8_e4m3": ("fp8", 1),
               "fp8_e5m2": ("fp8", 1), "tf32": ("tf32", 4), "fp32": ("fp32", 4)}
COLL_DTYPES = {"float32": "fp32", "float32 (sum)": "fp32", "bf16": "bf16", "float16": "fp16"}
# nccl-tests op name -> (madmax bench, busbw / algbw as a function of the ranks n); nccl-tests
# doc/PERFORMANCE.md.
COLLECTIVES = {
    "all_reduce": ("allreduce", lambda n: 2.0 * (n - 1) / n),
    "all_gather": ("allgather", lambda n: (n - 1.0) / n),
    "reduce_scatter": ("reducescatter", lambda n: (n - 1.0) / n),
    "alltoall": ("alltoall", lambda n: (n - 1.0) / n),
    "broadcast": ("broadcast", lambda n: 1.0),
}
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
STREAM_ELEMS = 1 << 28  # per array, bf16: an assumption, see the module doc

COLUMNS = "bench,kind,dtype,m,n,k,batch,bytes,flops,variant,reps,median_s,min_s,max_s,source"


def text(s):
    """A CSV field: no commas or line breaks (the format has no quoting)."""
    return re.sub(r"[\r\n]+", " ", str(s)).replace(",", ";")


def num(v):
    return "%.17g" % v


def row(bench, kind, dtype, m, n, k, batch, nbytes, flops, variant, seconds, source):
    assert seconds > 0 and nbytes >= 0 and flops >= 0
    t = "%.6e" % seconds
    return ",".join([bench, kind, dtype, num(m), num(n), num(k), num(batch), num(nbytes), num(flops),
                     text(variant), "0", t, t, t, text(source)])


def device_of(entry):
    gpu = (entry.get("hardware") or {}).get("gpu") or ""
    found = [key for key, pattern, _ in DEVICES if pattern.search(gpu)]
    return found[0] if len(found) == 1 else None


def cite(entry, metric=None):
    src = entry.get("source") or {}
    parts = [src.get("title"), src.get("locator"), "id " + entry["id"]]
    if metric:
        parts.append("metric " + metric)
    return "; ".join(p for p in parts if p)


def gemm_row(entry, m, n, k, tflops, variant, metric):
    g = entry["gemm"]
    dtype, elem = GEMM_DTYPES[g["dtype"]]
    flops = 2.0 * m * n * k
    nbytes = elem * (m * k + k * n) + 2 * m * n
    return row("gemm", "gemm", dtype, m, n, k, 1, nbytes, flops, variant, flops / (tflops * 1e12),
               cite(entry, metric))


def gemm_rows(entry, skipped):
    out = []
    for me in entry["measured"]:
        metric, value, series = me["metric"], me.get("value"), me.get("series")
        g = entry.get("gemm") or {}
        if g.get("dtype") not in GEMM_DTYPES:
            skipped.append("%s: gemm dtype %r unknown" % (entry["id"], g.get("dtype")))
            return out
        if metric == "max_achievable_matmul_tflops":
            out.append(gemm_row(entry, g["m"], g["n"], g["k"], value, "vendor;mamf", metric))
        elif metric == "square_gemm_tflops" and series:
            out += [gemm_row(entry, s, s, s, tf, "vendor", metric) for s, tf in series]
        elif metric == "other_shapes_tflops":
            shapes = json.loads(me["note"][me["note"].index("{"):])
            for shape, tf in shapes.items():
                m, n, k = (int(x) for x in shape.split("x"))
                out.append(gemm_row(entry, m, n, k, tf, "vendor", metric))
        elif metric != "efficiency_vs_spec":  # the same number over a spec peak
            skipped.append("%s: metric %s not a GEMM time" % (entry["id"], metric))
    return out


def stream_rows(entry, skipped):
    out = []
    for me in entry["measured"]:
        match = re.fullmatch(r"stream_(copy|triad)_TBps", me["metric"])
        if not match or me.get("unit") != "TB/s":
            skipped.append("%s: metric %s not a STREAM bandwidth" % (entry["id"], me["metric"]))
            continue
        arrays = 2 if match.group(1) == "copy" else 3
        nbytes = arrays * 2 * STREAM_ELEMS
        source = "%s; array size not given: 2^28 bf16 elements per array assumed (%g GiB moved)" % (
            cite(entry, me["metric"]), nbytes / 2**30)
        out.append(row("copy", "elementwise", "bf16", STREAM_ELEMS, 1, 1, 1, nbytes, 0,
                       "stream;" + match.group(1), nbytes / (me["value"] * 1e12), source))
    return out


def size_at(note):
    """Bytes from an "at 16 GiB" in a note, or None."""
    match = re.search(r"\bat (\d+(?:\.\d+)?) (B|KiB|MiB|GiB)\b", note or "")
    return int(float(match.group(1)) * UNITS[match.group(2)]) if match else None


def collective_rows(entry, skipped):
    c = entry["collective"]
    if c.get("op") not in COLLECTIVES:
        skipped.append("%s: op %r is not a collective madmax calibrates" % (entry["id"], c.get("op")))
        return []
    if (c.get("extra") or {}).get("env"):
        skipped.append("%s: measured with %s, not the default configuration" % (entry["id"], c["extra"]["env"]))
        return []
    bench, busbw_factor = COLLECTIVES[c["op"]]
    extra = c.get("extra") or {}
    dtype = COLL_DTYPES.get(c.get("dtype"), "")
    # (ranks, variant) -> {bytes: (seconds, metric)}; sweeps first, single points fill the gaps.
    points = {}
    for me in entry["measured"]:
        metric, value, series = me["metric"], me.get("value"), me.get("series")
        ranks_in_name = re.search(r"_(\d+)gpu\b", metric)
        ranks = int(ranks_in_name.group(1)) if ranks_in_name else c["num_ranks"]
        variant = "published" + (";nvls=0" if "nvls_off" in metric else "")
        kind = "bw" if re.match(r"(bus|alg)bw", metric) else "time" if metric.startswith("time_us") else None
        if kind is None or metric.endswith(("_avg", "_peak")):
            skipped.append("%s: metric %s is not one size's bandwidth or time" % (entry["id"], metric))
            continue

        def add(r, nbytes, seconds, m=metric, v=variant):
            points.setdefault((r, v), {}).setdefault(nbytes, (seconds, m))

        def seconds_from_bw(r, nbytes, gbps, m=metric):
            algbw = gbps * 1e9 / (busbw_factor(r) if m.startswith("busbw") else 1.0)
            return nbytes / algbw

        if kind == "bw" and series and extra.get("series_x") == "num_gpus":
            for r, gbps in series:
                add(int(r), extra["message_bytes"], seconds_from_bw(int(r), extra["message_bytes"], gbps))
        elif kind == "bw" and series:
            for nbytes, gbps in series:
                add(ranks, int(nbytes), seconds_from_bw(ranks, int(nbytes), gbps))
        elif kind == "bw":
            nbytes = extra.get("message_bytes") or size_at(me.get("note"))
            if nbytes is None:
                skipped.append("%s: metric %s: no message size" % (entry["id"], metric))
                continue
            add(ranks, nbytes, seconds_from_bw(ranks, nbytes, value))
        else:
            name_size = re.search(r"_(\d+)(B|KiB|MiB|GiB)$", metric)
            nbytes = (int(name_size.group(1)) * UNITS[name_size.group(2)] if name_size
                      else extra.get("message_bytes") or size_at(me.get("note")))
            if nbytes is None:
                skipped.append("%s: metric %s: no message size" % (entry["id"], metric))
                continue
            add(ranks, nbytes, value * 1e-6)
            # further "13.67 us at 8 B" points in the note
            for t, s, unit in re.findall(r"(\d+(?:\.\d+)?) us at (\d+(?:\.\d+)?) (B|KiB|MiB|GiB)\b", me.get("note") or ""):
                add(ranks, int(float(s) * UNITS[unit]), float(t) * 1e-6)
    out = []
    for (ranks, variant), by_size in points.items():
        for nbytes in sorted(by_size):
            seconds, metric = by_size[nbytes]
            out.append(row(bench, "", dtype, ranks, 1, 1, 1, nbytes, 0, variant, seconds, cite(entry, metric)))
    return out


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    path = argv[1]
    out_dir = argv[2] if len(argv) == 3 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                            "hardware", "calibration")
    with open(path) as f:
        entries = json.load(f)
    rows, skipped = {}, []
    for entry in entries:
        category = entry.get("category")
        if category not in ("gemm_efficiency", "memory_bandwidth", "collective_bandwidth"):
            continue
        device = device_of(entry)
        if device is None:
            skipped.append("%s: device %r is not one GPU madmax has a file for" % (
                entry["id"], (entry.get("hardware") or {}).get("gpu")))
            continue
        convert = {"gemm_efficiency": gemm_rows, "memory_bandwidth": stream_rows,
                   "collective_bandwidth": collective_rows}[category]
        rows.setdefault(device, []).extend(convert(entry, skipped))
    shown = os.path.join(os.path.basename(os.path.dirname(os.path.abspath(path))), os.path.basename(path))
    for key, _, name in DEVICES:
        if not rows.get(key):
            continue
        out_path = os.path.join(out_dir, "public-%s.csv" % key)
        with open(out_path, "w") as f:
            f.write("# madmax calibration v1\n")
            f.write("# device: %s\n" % name)
            f.write("# source: published measurements from %s (see each row's source)\n" % text(shown))
            f.write("# platform: published\n")
            f.write("# harness: scripts/public-to-csv.py\n")
            f.write(COLUMNS + "\n")
            for r in rows[key]:
                f.write(r + "\n")
        print("%s: %d rows" % (out_path, len(rows[key])))
    for s in skipped:
        print("skipped: " + s, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
