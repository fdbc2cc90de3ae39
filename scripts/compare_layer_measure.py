#!/usr/bin/env python3
"""paraplan's per-layer time against scripts/gpu_layer_measure.py's measurement, row by row.

For each measured (model, tp, micro-batch) it asks `paraplan explain --formulas` for the nanotron spec of the same
shapes on one H100 node (tp without sequence parallelism, as the measurement emulates it) and prints, per layer and
micro-batch, forward + backward: paraplan's linear GEMMs, attention core and memory-bound ops against the measured
GEMM, attention and other kernels, and the whole layer against the measured wall time (kernels + idle).

Usage: python3 scripts/compare_layer_measure.py LAYER_MEASURE_JSON [PARAPLAN] [CLUSTER_YAML]
"""
import json
import os
import re
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
meas = json.load(open(sys.argv[1]))
paraplan = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "build", "paraplan")
cluster = sys.argv[3] if len(sys.argv) > 3 else os.path.join(here, "..", "configs", "clusters", "h100-aws-p5.yaml")


def predicted(row):
    spec = f"""model: {row['model']}
cluster: {os.path.abspath(cluster)}
num_nodes: 1
training:
  framework: nanotron
  seq_length: {row['seq']}
  global_batch_size: {8 // row['tp'] * row['mbs']}
  flash_attention: true
layout: "tp={row['tp']},pp=1,sp=0,zero=1,mbs={row['mbs']}"
"""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(spec)
    try:
        out = subprocess.run([paraplan, "explain", f.name, "--formulas"], capture_output=True, text=True,
                             timeout=60).stdout
    finally:
        os.unlink(f.name)
    num = r"([0-9.]+)"
    lin = re.search(r"linear GEMMs\s+[0-9.]+ layers x \(forward " + num + r" ms \+ input/weight gradients " + num, out)
    att = re.search(r"attention core\s+[0-9.]+ layers x " + num + r" ms x ([0-9.]+)", out)
    mem = re.search(r"memory-bound ops\s+[0-9.]+ layers x \(" + num + r" ms forward \+ " + num + r" ms backward\)", out)
    if not (lin and att and mem):
        return None
    return {"gemm": (float(lin.group(1)) + float(lin.group(2))) * 1e-3,
            "attention": float(att.group(1)) * float(att.group(2)) * 1e-3,
            "memory_bound": (float(mem.group(1)) + float(mem.group(2))) * 1e-3}


print(f"{'model':18s} tp mbs | {'GEMM ms':>15s} | {'attention ms':>15s} | {'other ms':>15s} | "
      f"{'layer ms':>15s} | idle ms   (measured / paraplan)")
for r in meas.get("layer", []):
    p = predicted(r)
    if p is None:
        print(r["model"], "tp", r["tp"], "mbs", r["mbs"], ": paraplan gave no per-layer terms")
        continue
    k = r["kernel_s"]
    total_p = p["gemm"] + p["attention"] + p["memory_bound"]
    cells = [(k["gemm"], p["gemm"]), (k["attention"], p["attention"]), (k["other"], p["memory_bound"]),
             (r["forward_backward_s"], total_p)]
    print(f"{r['model']:18s} {r['tp']:2d} {r['mbs']:3d} | "
          + " | ".join(f"{m * 1e3:7.3f}/{q * 1e3:7.3f}" for m, q in cells) + f" | {r['idle_s'] * 1e3:7.3f}")
