#!/usr/bin/env python3
"""Measurements of one GPU through PyTorch (cuBLAS, its flash attention, its caching allocator), an
oracle nobody on this project wrote, for the cost model's GPU terms (docs/gpu.md "Measured through
PyTorch"):

  memory     CUDA context and cuBLAS workspace outside/inside the caching allocator (cudaMemGetInfo
             against torch.cuda.memory_reserved) after init, after a bf16 GEMM, after SDPA;
  gemm       achieved TFLOP/s of the linear layers' forward, input-gradient and weight-gradient GEMMs
             of Llama-family layers (the Ultra-Scale Playbook's 1B/3B, Llama-2-7B, Llama-3.1-8B/70B)
             at tp 1/2/4/8 and 4,096 / 8,192 / 16,384 tokens, as autograd runs them
             (x @ W^T, dy @ W, dy^T @ x), bf16 in, bf16 out, fp32 accumulate;
  attention  torch SDPA causal fwd and fwd+bwd, flash and cuDNN backends, Dao's benchmark setting
             (16k tokens per batch, hidden 2048, head dim 64 and 128);
  hbm        a bf16 copy and add over 1 GiB (the memory-bound rate);
  sustained  8192^3 bf16 GEMMs back to back for 20 s (clock and power while they run: nvidia-smi log).

Usage: python3 scripts/gpu_torch_measure.py OUT_DIR [--quick]   (--quick: tiny sizes, CPU allowed)
Writes OUT_DIR/torch_measure.json and prints a summary. Every step has its own time budget.
"""
import json
import os
import subprocess
import sys
import time

import torch

import torch_timing  # scripts/torch_timing.py

out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
quick = "--quick" in sys.argv
dev = "cuda" if torch.cuda.is_available() else "cpu"
res = {"torch": torch.__version__, "device": dev, "quick": quick}
if dev == "cuda":
    p = torch.cuda.get_device_properties(0)
    res.update(gpu=p.name, sms=p.multi_processor_count, total_bytes=p.total_memory,
               cuda=torch.version.cuda,
               cuda_module_loading=os.environ.get("CUDA_MODULE_LOADING", "(unset: PyTorch sets LAZY)"))


def save():
    with open(os.path.join(out_dir, "torch_measure.json"), "w") as f:
        json.dump(res, f, indent=1)


def sync():
    torch_timing.sync(dev)


def timeit(fn, min_time=0.05, max_iters=200):
    """Mean time of a batch of back-to-back calls after a warm-up (CUDA events on the GPU)."""
    return torch_timing.mean_call_time(fn, dev, min_time, max_iters)


# ---- memory: what the process holds outside the caching allocator
if dev == "cuda":
    def used():
        free, total = torch.cuda.mem_get_info()
        return total - free
    mem = {}
    torch.zeros(1, device="cuda"); sync()
    mem["after_init"] = {"device_used": used(), "reserved": torch.cuda.memory_reserved()}
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    c = a @ a; sync()
    mem["after_bf16_gemm"] = {"device_used": used(), "reserved": torch.cuda.memory_reserved(),
                              "allocated": torch.cuda.memory_allocated()}
    del a, c
    q = torch.randn(1, 16, 4096, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    o = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True); o.sum().backward(); sync()
    mem["after_sdpa_fwd_bwd"] = {"device_used": used(), "reserved": torch.cuda.memory_reserved()}
    del q, o
    torch.cuda.empty_cache(); sync()
    mem["after_empty_cache"] = {"device_used": used(), "reserved": torch.cuda.memory_reserved()}
    res["memory"] = mem
    save()

# ---- GEMMs at the linear layers' shapes
# (name, hidden, ffn, heads, kv_heads, vocab) from each model's config.json (configs/models/ cites them).
models = [("playbook-1b", 2048, 8192, 32, 8, 128256), ("playbook-3b", 3072, 8192, 24, 8, 128256),
          ("llama-2-7b", 4096, 11008, 32, 32, 32000), ("llama-3.1-8b", 4096, 14336, 32, 8, 128256),
          ("llama-3.1-70b", 8192, 28672, 64, 8, 128256)]
tps = [1, 2, 4, 8]
tokens = [4096, 8192, 16384]
if quick:
    models = [("tiny", 256, 512, 4, 2, 1000)]
    tps, tokens = [1, 2], [128]
dt = torch.bfloat16 if dev == "cuda" else torch.float32
gemms = []
seen = {}
t_start = time.time()
budget = 110 if not quick else 30
for (name, h, f, nh, nkv, V) in models:
    hd = h // nh
    for tp in tps:
        linears = [("qkv", h, (h + 2 * nkv * hd) // tp), ("proj", h // tp, h), ("gate_up", h, 2 * f // tp),
                   ("down", f // tp, h), ("lm_head", h, V // tp)]
        for T in tokens:
            for (lin, k, n) in linears:
                if time.time() - t_start > budget:
                    break
                x = torch.randn(T, k, device=dev, dtype=dt)
                w = torch.randn(n, k, device=dev, dtype=dt)
                dy = torch.randn(T, n, device=dev, dtype=dt)
                row = {"model": name, "tp": tp, "tokens": T, "linear": lin}
                for (kind, fn, shape) in [("fwd", lambda: x @ w.t(), (T, n, k)),
                                          ("dgrad", lambda: dy @ w, (T, k, n)),
                                          ("wgrad", lambda: dy.t() @ x, (n, k, T))]:
                    key = (kind, shape)
                    if key in seen:
                        s = seen[key]
                    else:
                        s = timeit(fn)
                        seen[key] = s
                    m_, n_, k_ = shape
                    row[kind] = {"m": m_, "n": n_, "k": k_, "s": s, "tflops": 2.0 * m_ * n_ * k_ / s / 1e12}
                gemms.append(row)
                del x, w, dy
res["gemm"] = gemms
res["gemm_budget_hit"] = time.time() - t_start > budget
save()

# ---- attention (SDPA), Dao's FlashAttention-2 benchmark setting
att = []
try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
except ImportError:
    backends = []
if dev == "cuda":
    for hd in (64, 128):
        for s in (512, 1024, 2048, 4096, 8192, 16384):
            b, nh = 16384 // s, 2048 // hd
            q, k_, v = (torch.randn(b, nh, s, hd, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                        for _ in range(3))
            do = torch.randn(b, nh, s, hd, device="cuda", dtype=torch.bfloat16)
            fl = 4.0 * b * s * s * nh * hd / 2  # causal: half the s^2 products (Dao's count)
            for (bn, be) in backends:
                row = {"backend": bn, "head_dim": hd, "seq": s, "batch": b}
                try:
                    with sdpa_kernel([be]):
                        def fwd():
                            return torch.nn.functional.scaled_dot_product_attention(q, k_, v, is_causal=True)

                        def fwdbwd():
                            o = fwd()
                            torch.autograd.grad(o, (q, k_, v), do)
                        tf = timeit(fwd)
                        tb = timeit(fwdbwd)
                    row.update(fwd_s=tf, fwd_tflops=fl / tf / 1e12, fwd_bwd_s=tb, fwd_bwd_tflops=3.5 * fl / tb / 1e12)
                except Exception as e:  # noqa: BLE001 (a backend this build lacks)
                    row["error"] = str(e).splitlines()[0][:200]
                att.append(row)
            del q, k_, v, do
res["attention"] = att
save()

# ---- memory-bound rate
if dev == "cuda":
    n = (1 << 30) // 2
    a = torch.empty(n, device="cuda", dtype=torch.bfloat16).normal_()
    b = torch.empty_like(a)
    tc = timeit(lambda: b.copy_(a))
    ta = timeit(lambda: torch.add(a, a, out=b))
    res["hbm"] = {"copy_bytes": 4 * n, "copy_gbs": 4 * n / tc / 1e9, "add_gbs": 4 * n / ta / 1e9}
    del a, b
    save()

# ---- sustained 8192^3
if dev == "cuda":
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    bm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    samples = []
    t_end = time.time() + 20
    while time.time() < t_end:
        s = timeit(lambda: a @ bm, min_time=0.5, max_iters=2000)
        samples.append({"t": round(time.time() - t_end + 20, 2), "tflops": 2 * 8192 ** 3 / s / 1e12})
    res["sustained_8192"] = samples
    save()

print(json.dumps({k: v for k, v in res.items() if k not in ("gemm", "attention", "sustained_8192")}, indent=1))
for r in res.get("gemm", [])[:400]:
    print(f"{r['model']:14s} tp{r['tp']} T{r['tokens']:6d} {r['linear']:8s} "
          + " ".join(f"{k} {r[k]['tflops']:6.1f}" for k in ("fwd", "dgrad", "wgrad")))
for r in res.get("attention", []):
    print(r)
if res.get("sustained_8192"):
    print("sustained:", [round(s["tflops"]) for s in res["sustained_8192"]])
