"""Timing of back-to-back calls through PyTorch, shared by the GPU measurement scripts
(scripts/gpu_torch_measure.py, scripts/gpu_layer_measure.py)."""
import time

import torch


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def mean_call_time(fn, dev, min_time, max_iters=None, warmup=False):
    """Mean time of fn over back-to-back calls lasting about min_time (at most max_iters of them): CUDA events on
    the GPU, the wall clock on the CPU. warmup: first run as many calls untimed, so that the clocks settle where
    sustained load puts them."""
    fn(); sync(dev)
    t0 = time.perf_counter(); fn(); sync(dev); one = max(time.perf_counter() - t0, 1e-6)
    iters = max(3, int(min_time / one))
    if max_iters is not None:
        iters = min(iters, max_iters)
    if warmup:
        for _ in range(iters):
            fn()
        sync(dev)
    if dev == "cuda":
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record(); b.synchronize()
        return a.elapsed_time(b) / 1e3 / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters
