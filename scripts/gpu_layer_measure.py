#!/usr/bin/env python3
"""One decoder layer as nanotron runs it, forward + backward through PyTorch eager on one GPU, timed under
sustained load and taken apart by kernel kind, for what paraplan's per-layer time stands for
(`paraplan explain --formulas`: "linear GEMMs", "attention core", "memory-bound ops"; issue 15: one-node H100
runs are predicted 10-20 % fast where the GPU sets the pace, and the cause is not yet measured):

  layer        for each (model, tp, micro-batch): the layer's forward + backward per micro-batch (CUDA events
               over >= 2 s of back-to-back micro-batches, after as long a warm-up), and from torch.profiler over
               5 micro-batches the kernel time by kind (GEMM, attention, other) and the GPU's idle time between
               kernels. The layer is nanotron@67c5ebb6's Llama block (src/nanotron/models/llama.py:460-474,
               655-657, 687-689, 199-201: fused QKV, the [3, b, s, heads, d] and K|V copies, the attention
               output's copy back to [s, b, h], the unfused GLU); tp is emulated by shape (heads / tp, ffn / tp,
               every token on the rank: no collectives, no sequence parallelism); RMSNorm is
               torch.nn.functional.rms_norm and the rotary embedding six torch ops where nanotron launches one
               Triton kernel each (their kernels count as "other"); attention is SDPA's flash backend (PyTorch's
               FlashAttention-2, forced: left alone PyTorch 2.11 picks cuDNN's fused attention on an H100),
               nanotron calls flash_attn_varlen_func. rotary_s times the six-op rotary of q and k alone, forward +
               backward, to take out of "other" what nanotron's one Triton kernel does not spend.
  elementwise  copy, add, mul, SiLU and a transposing copy at 1 MiB - 1 GiB per operand: time against bytes
               moved; a least-squares line gives the memory-bound rate and a fixed time per kernel.

  attention    causal attention forward + backward at Llama-2-7B's head dim (8 heads, seq 8192, micro-batch 2)
               through SDPA's flash and cuDNN backends, with and without dropout 0.1 and deterministic algorithms
               (what Megatron's CI rows run with).

Usage: python3 scripts/gpu_layer_measure.py OUT_DIR [--quick]   (--quick: tiny sizes; runs on the CPU too)
Writes OUT_DIR/layer_measure.json and prints a summary. Compare with paraplan: for each row, the nanotron
spec of the same model, tp and micro-batch on one H100 node (configs/clusters/h100-aws-p5.yaml), per layer.
"""
import json
import os
import sys
import time

try:
    import torch
    import torch.nn.functional as F

    import torch_timing  # scripts/torch_timing.py
except ImportError:  # the suite's quick run skips (exit 77) where PyTorch is missing
    print("gpu_layer_measure: PyTorch cannot be imported; skipped")
    sys.exit(77)

out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
quick = "--quick" in sys.argv
dev = "cuda" if torch.cuda.is_available() else "cpu"
dt = torch.bfloat16 if dev == "cuda" else torch.float32
res = {"torch": torch.__version__, "device": dev, "quick": quick, "dtype": str(dt)}
if dev == "cuda":
    p = torch.cuda.get_device_properties(0)
    res.update(gpu=p.name, sms=p.multi_processor_count, cuda=torch.version.cuda)


def save():
    with open(os.path.join(out_dir, "layer_measure.json"), "w") as f:
        json.dump(res, f, indent=1)


def sync():
    torch_timing.sync(dev)


def timed(fn, seconds):
    """Mean time of fn over back-to-back calls lasting about `seconds`, after as long a warm-up."""
    return torch_timing.mean_call_time(fn, dev, seconds, warmup=True)


def rms_norm(x, w, eps=1e-5):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), w, eps)
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * w


def attention(q, k, v):
    """q, k, v: [b, s, heads, d] -> [b, s, heads, d], causal."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    if hasattr(F, "scaled_dot_product_attention"):
        if dev == "cuda":  # FlashAttention-2, as nanotron calls it: left alone SDPA picks cuDNN's on sm90 (2.11)
            from torch.nn.attention import SDPBackend, sdpa_kernel
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:  # the CPU's PyTorch 1.13: the unfused product (--quick only)
        s = q.shape[2]
        a = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
        a = a.masked_fill(torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        o = a.softmax(-1) @ v
    return o.transpose(1, 2)


class Layer(torch.nn.Module):
    def __init__(self, h, heads, ffn, tp, seq):
        super().__init__()
        self.nh, self.hd, self.ffn = heads // tp, h // heads, ffn // tp
        w = lambda *s: torch.nn.Parameter(torch.randn(*s, device=dev, dtype=dt) * 0.02)  # noqa: E731
        self.w_qkv, self.w_o = w(3 * self.nh * self.hd, h), w(h, self.nh * self.hd)
        self.w_gu, self.w_d = w(2 * self.ffn, h), w(h, self.ffn)
        self.n1 = torch.nn.Parameter(torch.ones(h, device=dev, dtype=dt))
        self.n2 = torch.nn.Parameter(torch.ones(h, device=dev, dtype=dt))
        f = 1.0 / 10000 ** (torch.arange(0, self.hd, 2, device=dev).float() / self.hd)
        ang = torch.arange(seq, device=dev).float()[:, None] * f[None]
        self.cos, self.sin = ang.cos().to(dt)[None, :, None], ang.sin().to(dt)[None, :, None]

    def rotary(self, x):  # [b, s, heads, d]
        x1, x2 = x.chunk(2, -1)
        return torch.cat((x1 * self.cos - x2 * self.sin, x2 * self.cos + x1 * self.sin), -1)

    def forward(self, x):  # [s, b, h], nanotron's layout
        s, b, _ = x.shape
        r = x
        qkv = F.linear(rms_norm(x, self.n1), self.w_qkv)
        q, k, v = qkv.view(s, b, 3, self.nh, self.hd).permute(2, 1, 0, 3, 4).contiguous()  # llama.py:470-474
        kv = torch.cat([k.unsqueeze(0), v.unsqueeze(0)], 0).permute(1, 2, 0, 3, 4).contiguous()  # :655-657
        k, v = kv[:, :, 0], kv[:, :, 1]
        o = attention(self.rotary(q), self.rotary(k), v)
        o = o.contiguous().view(b, s, self.nh * self.hd).transpose(0, 1)  # :687-689
        x = r + F.linear(o, self.w_o)
        g, u = F.linear(rms_norm(x, self.n2), self.w_gu).split(self.ffn, -1)
        return x + F.linear(F.silu(g) * u, self.w_d)  # :199-201


def kind(name):
    n = name.lower()
    if "flash" in n or "fmha" in n or "attention" in n or "sdpa" in n:
        return "attention"
    if "gemm" in n or "xmma" in n or "cutlass" in n or "nvjet" in n or "matmul" in n or n.startswith("sm90_") \
            or n.startswith("sm80_") or "addmm" in n or n.startswith("aten::mm") or n.startswith("aten::bmm"):
        return "gemm"
    return "other"


def profile_layer(step, n=5):
    """Kernel time by kind and the GPU's idle time over n micro-batches (per micro-batch)."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CUDA] if dev == "cuda" else [ProfilerActivity.CPU]
    sync()
    with profile(activities=acts) as prof:
        for _ in range(n):
            step()
        sync()
    spans, by, names = [], {"gemm": 0.0, "attention": 0.0, "other": 0.0}, {}
    for e in prof.events():
        if dev == "cuda" and e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        if dev == "cpu" and (not e.name.startswith("aten::") or e.cpu_parent is not None):
            continue  # top-level aten ops only on the CPU
        t0 = e.time_range.start; t1 = e.time_range.end
        spans.append((t0, t1))
        by[kind(e.name)] += (t1 - t0) * 1e-6
        t, c = names.get(e.name, (0.0, 0))
        names[e.name] = (t + (t1 - t0) * 1e-6, c + 1)
    spans.sort()
    busy, end = 0.0, None
    for a, b in spans:  # union of the kernels' intervals
        if end is None or a > end:
            busy += b - a; end = b
        elif b > end:
            busy += b - end; end = b
    wall = (spans[-1][1] - spans[0][0]) * 1e-6 if spans else 0.0
    top = sorted(names.items(), key=lambda kv: -kv[1][0])[:30]
    kernels = [{"name": k[:160], "kind": kind(k), "s": t / n, "calls": c / n} for k, (t, c) in top]
    return {k: v / n for k, v in by.items()}, busy * 1e-6 / n, (wall - busy * 1e-6) / n, kernels


# (name, hidden, heads, ffn, layers): huggingface/nanotron@67c5ebb6 scaling_benchmarks.py:304-305
# (configs/models/nanotron-bench-1b.yaml, -3b.yaml).
models = [("nanotron-bench-1b", 2048, 32, 8192), ("nanotron-bench-3b", 3072, 32, 8192)]
tps, mbss, seq, seconds = [1, 2, 4, 8], [1, 2, 4], 4096, 2.0
if quick:
    models, tps, mbss, seq, seconds = [("tiny", 128, 4, 256)], [1, 2], [1], 64, 0.05
only = None  # --rows 1b:1:1,3b:8:4 measures those (model suffix, tp, micro-batch) alone
if "--rows" in sys.argv:
    only = {tuple(x.split(":")) for x in sys.argv[sys.argv.index("--rows") + 1].split(",")}
rows = []
res["layer"] = rows  # saved after every row, so a run cut short keeps what it measured
t_start = time.time()
budget = 300 if not quick else 60
for (name, h, heads, ffn) in models:
    for tp in tps:
        for mbs in mbss:
            if time.time() - t_start > budget:
                break
            if only is not None and (name.split("-")[-1], str(tp), str(mbs)) not in only:
                continue
            torch.manual_seed(0)
            layer = Layer(h, heads, ffn, tp, seq)
            x = torch.randn(seq, mbs, h, device=dev, dtype=dt, requires_grad=True)
            dy = torch.randn(seq, mbs, h, device=dev, dtype=dt)

            def step():
                y = layer(x)
                torch.autograd.backward(y, dy)
                layer.zero_grad(set_to_none=True)
                x.grad = None

            qr = torch.randn(mbs, seq, layer.nh, layer.hd, device=dev, dtype=dt, requires_grad=True)

            def rot():  # the rotary embedding of q and k alone, forward + backward (six torch ops each way)
                torch.autograd.backward([layer.rotary(qr), layer.rotary(qr)], [qr.detach(), qr.detach()])
                qr.grad = None

            rotary_s = timed(rot, seconds / 4)
            try:  # its kernels' own time (rotary_s is the host's where the host sets the pace)
                rotary_kernel_s = profile_layer(rot)[1]
            except Exception as e:
                print("profiler failed:", repr(e))
                rotary_kernel_s = 0.0
            fwd = timed(lambda: layer(x).sum() if dev == "cpu" else layer(x), seconds / 4)
            total = timed(step, seconds)
            try:
                by, busy, idle, kernels = profile_layer(step)
            except Exception as e:  # a profiler that fails still leaves the timings
                print("profiler failed:", repr(e))
                by, busy, idle, kernels = {"gemm": 0.0, "attention": 0.0, "other": 0.0}, 0.0, 0.0, []
            rows.append({"model": name, "hidden": h, "heads": heads, "ffn": ffn, "tp": tp, "mbs": mbs, "seq": seq,
                         "forward_s": fwd, "forward_backward_s": total, "kernel_s": by, "busy_s": busy,
                         "idle_s": idle, "kernels": kernels, "rotary_s": rotary_s,
                         "rotary_kernel_s": rotary_kernel_s})
            del layer, x, dy, qr
            save()
res["layer"] = rows
res["layer_budget_hit"] = time.time() - t_start > budget
save()

# ---- elementwise kernels against bytes moved
ew = []
sizes = [1 << p for p in range(20, 31, 2)] if not quick else [1 << 16, 1 << 18]
for nbytes in sizes:
    n = nbytes // (2 if dt == torch.bfloat16 else 4)
    a = torch.randn(n, device=dev, dtype=dt)
    b = torch.empty_like(a)
    c = torch.randn_like(a)  # a second operand: add(a, a) reads a once
    side = int(n ** 0.5)
    m2 = a[: side * side].view(side, side)
    for (op, fn, moved) in [("copy", lambda: b.copy_(a), 2), ("add", lambda: torch.add(a, c, out=b), 3),
                            ("mul", lambda: torch.mul(a, c, out=b), 3), ("silu", lambda: F.silu(a), 2),
                            ("transpose_copy", lambda: m2.t().contiguous(), 2)]:
        s = timed(fn, 0.2 if not quick else 0.02)
        ew.append({"op": op, "operand_bytes": nbytes, "moved_bytes": moved * nbytes, "s": s,
                   "gbs": moved * nbytes / s / 1e9})
    del a, b, c, m2
res["elementwise"] = ew
# Least squares over the contiguous ops: time = fixed + moved / rate.
pts = [(r["moved_bytes"], r["s"]) for r in ew if r["op"] != "transpose_copy"
       and (quick or r["operand_bytes"] >= 64 << 20)]  # past the 50 MB L2
if len(pts) >= 2:
    mx = sum(p[0] for p in pts) / len(pts); my = sum(p[1] for p in pts) / len(pts)
    slope = sum((p[0] - mx) * (p[1] - my) for p in pts) / max(sum((p[0] - mx) ** 2 for p in pts), 1e-30)
    res["elementwise_fit"] = {"rate_gbs": 1 / slope / 1e9 if slope > 0 else None, "fixed_us": (my - slope * mx) * 1e6}
save()

# ---- attention variants (Megatron's CI rows run with attention dropout 0.1 and deterministic algorithms,
# NVTE_ALLOW_NONDETERMINISTIC_ALGO=0: NVIDIA/Megatron-LM@d98e8a64 tests/functional_tests/test_cases/gpt/
# gpt3_7b_tp4_pp1_memory_speed/model_config.yaml): causal attention forward + backward at Llama-2-7B's head dim 128,
# 8 heads (tp 4), seq 8192, micro-batch 2, through SDPA's flash and cuDNN backends, with and without dropout 0.1 and
# deterministic algorithms (torch.use_deterministic_algorithms). --quick: the math backend on tiny shapes.
def attention_variant(backend, dropout, deterministic, b, heads, s, d):
    q, k, v = (torch.randn(b, heads, s, d, device=dev, dtype=dt, requires_grad=True) for _ in range(3))
    do = torch.randn(b, heads, s, d, device=dev, dtype=dt)

    def step():
        if dev == "cuda":
            from torch.nn.attention import sdpa_kernel
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
        elif hasattr(F, "scaled_dot_product_attention"):
            o = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
        else:  # the CPU's PyTorch 1.13 (--quick): the unfused product, dropout on the probabilities' output
            o = F.dropout(attention(*(t.transpose(1, 2) for t in (q, k, v))).transpose(1, 2), dropout)
        torch.autograd.backward(o, do)
        q.grad = k.grad = v.grad = None

    torch.use_deterministic_algorithms(deterministic, warn_only=True)
    try:
        return timed(step, 0.5 if not quick else 0.02)
    finally:
        torch.use_deterministic_algorithms(False)


att = []
if True:
    shape = (2, 8, 8192, 128) if not quick else (1, 2, 64, 16)
    if dev == "cuda":
        from torch.nn.attention import SDPBackend
        backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    else:
        backends = [("math", None)]
    for name, backend in backends:
        for dropout in (0.0, 0.1):
            for deterministic in (False, True):
                try:
                    t = attention_variant(backend, dropout, deterministic, *shape)
                except Exception as e:  # a backend that refuses the combination
                    att.append({"backend": name, "dropout": dropout, "deterministic": deterministic, "error": repr(e)[:200]})
                    continue
                b, h, sq, d = shape
                flops = 4 * b * h * sq * sq * d / 2 * 3.5  # the causal half, forward + backward (2.5x the forward)
                att.append({"backend": name, "dropout": dropout, "deterministic": deterministic, "shape": list(shape),
                            "s": t, "tflops_causal": flops / t / 1e12})
                print(f"attention {name:5s} dropout {dropout} deterministic {deterministic}: {t * 1e3:8.3f} ms "
                      f"({flops / t / 1e12:6.1f} TFLOP/s causal)")
res["attention_variants"] = att
save()

for r in rows:
    k = r["kernel_s"]
    print(f"{r['model']:18s} tp{r['tp']} mbs{r['mbs']}: fwd+bwd {r['forward_backward_s'] * 1e3:8.3f} ms "
          f"(fwd {r['forward_s'] * 1e3:7.3f}); kernels gemm {k['gemm'] * 1e3:7.3f} attention {k['attention'] * 1e3:7.3f} "
          f"other {k['other'] * 1e3:7.3f}; idle {r['idle_s'] * 1e3:6.3f} ms")
print("elementwise fit:", res.get("elementwise_fit"))
if quick and only is None:  # the suite runs --quick on the CPU: every row measured, every figure positive
    # (positive only: on tiny CPU shapes a loaded machine can time a forward above its forward + backward)
    assert len(rows) == 2 and all(r["forward_backward_s"] > 0 and r["forward_s"] > 0 and r["busy_s"] > 0 for r in rows), rows
    assert all(e["s"] > 0 for e in ew) and res["elementwise_fit"]["rate_gbs"], res["elementwise_fit"]
    assert len(att) == 4 and all(a.get("s", 0) > 0 for a in att), att
