#!/usr/bin/python3
"""The PyTorch oracle for paraplan's framework profiles (issue 13).

Real PyTorch autograd (Debian python3-torch, CPU) runs one transformer layer
forward and counts exactly what it saves for backward through
torch.autograd.graph.saved_tensors_hooks, one count per storage (a view keeps its
whole storage alive), parameters and constant buffers left out. The output
layer + loss run under the autograd profiler with memory profiling, and the
peak of live bytes above the baseline is the loss's forward peak (and, for the
eager loss, its backward peak: loss_backward_peak). All are
compared, byte for byte, with what paraplan_oracle_probe says the profile
predicts at the same shape.

Blocks (no dropout; tensor parallelism emulated by shape, Megatron's column /
row split without sequence parallelism: heads, kv heads, ffn and vocabulary
divided by tp):
  * nanotron Llama layer, MHA and GQA, bf16: eager PyTorch except its two
    kernels, whose stand-ins save exactly what the kernels save:
    flash-attn's Triton RMSNorm (x and fp32 rstd; flash_attn/ops/triton/
    layer_norm.py:914-916) and flash_attn_varlen_func (q, k, v, out and the fp32
    log-sum-exp; flash_attn_interface.py:965-967; its cu_seqlens and rng state,
    2(b+1) int32 + 2 int64, are left out here and in the profile). Everything
    else (the linears, the MHA [3,b,s,a,d] copy and the k,v concatenation, the
    GLU split views, SiLU, the multiply) is PyTorch deciding what to keep.
  * nanotron loss: lm-head linear, .float() kept by the caller, and the sharded
    cross-entropy's forward re-expressed in PyTorch ops (max; a new tensor for
    logits - max; exp and division in place; the per-token tensors).
  * eager GPT-style layer (LayerNorm, fused QKV with biases, causal math
    attention, GeLU), fp32, for the profiles of stacks that run the user's
    eager PyTorch model (deepspeed, fsdp); their loss is F.cross_entropy on
    logits.float(), except torchtitan's (fsdp) at tp > 1: its vocab-parallel
    cross-entropy's ops on one rank (titan_loss_parallel_peaks), forward and
    backward.
  * torchtitan mixture-of-experts layer (fsdp profile), bf16, ep = 1: its
    router, dispatcher, grouped experts and combine in PyTorch ops, with
    torch._grouped_mm (missing from this PyTorch) as a stand-in that saves
    what its autograd formula reads.
  * torchtitan's per-op selective checkpointing (fsdp, recompute=selective):
    the torchtitan block runs under a TorchDispatchMode that applies its "op"
    policy (parallelize_llama.py:214-285 @9dec370: keep the output of every odd
    aten.mm, and of SDPA) to the aten ops PyTorch really dispatches; with the
    block input, that is what the checkpoint keeps.
Exit status: 0 all equal, 1 a mismatch, 77 torch cannot be imported (skipped).
"""
import json
import math
import subprocess
import sys
import weakref

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print(f"SKIPPED: PyTorch is not importable by {sys.executable} ({e}); install Debian python3-torch")
    sys.exit(77)

torch.manual_seed(0)
PROBE = sys.argv[1]


def storage_key(t):
    s = t.storage()
    return s.data_ptr(), s.nbytes()


class _Saved:
    """What a graph node holds for one saved tensor (the pack hook's result)."""
    __slots__ = ("t", "__weakref__")

    def __init__(self, t):
        self.t = t


class SavedCounter:
    """Unique storages saved for backward by the graph still alive when
    total() is called, less the ones in `exclude`. A node whose outputs are
    all dropped (a branch that only feeds argmax, say) frees what it saved at
    once; what it held is not counted (nor is its storage, whose address a
    later tensor may reuse)."""

    def __init__(self, exclude):
        self.exclude = {storage_key(t)[0] for t in exclude}
        self.saved = []

    def pack(self, t):
        if t.dim() == 0:  # a wrapped Python scalar (e.g. the 1/sqrt(d) divisor), not an activation
            return t
        held = _Saved(t)
        ptr, nbytes = storage_key(t)
        if ptr not in self.exclude:
            self.saved.append((ptr, nbytes, weakref.ref(held)))
        return held

    def total(self):
        """Call it with the forward's output alive (the graph is freed with it)."""
        return sum({ptr: nbytes for ptr, nbytes, held in self.saved if held() is not None}.values())

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda h: h.t if isinstance(h, _Saved) else h)


# ---- kernel stand-ins: they save what the CUDA kernels save -----------------


class TritonRMSNorm(torch.autograd.Function):
    """flash-attn layer_norm_fn(x, w, None, is_rms_norm=True): saves x, w, rstd (fp32)."""

    @staticmethod
    def forward(ctx, x, w, eps):
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1) + eps)  # fp32, one per row
        y = (xf * rstd.unsqueeze(-1)).to(x.dtype) * w
        ctx.save_for_backward(x, w, rstd)
        return y

    @staticmethod
    def backward(ctx, g):  # not needed for counting
        raise NotImplementedError


def flash_forward(q, k, v, b, s):
    """Causal attention as the flash kernel computes it: q [b*s, a, d], k and v [b*s, g, d] ->
    the output [b*s, a, d] in q's dtype and the fp32 log-sum-exp [b, a, s]."""
    a, d, g = q.shape[1], q.shape[2], k.shape[1]
    qh = q.reshape(b, s, a, d).transpose(1, 2).float()
    kh = k.reshape(b, s, g, d).transpose(1, 2).float().repeat_interleave(a // g, dim=1)
    vh = v.reshape(b, s, g, d).transpose(1, 2).float().repeat_interleave(a // g, dim=1)
    scores = qh @ kh.transpose(-1, -2) / math.sqrt(d)
    scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(scores, -1)  # [b, a, s] fp32
    out = (torch.softmax(scores, -1) @ vh).transpose(1, 2).reshape(b * s, a, d).to(q.dtype).contiguous()
    return out, lse


def titan_qkv(x, norm_w, wq, wk, wv, cache, a, g, d):
    """torchtitan's attention input: the fused RMSNorm, the q, k, v linears and ComplexRoPE on q and k
    (rope.py:260-264 apply_rotary_emb), as [b, s, heads, d]."""
    b, s = x.shape[0], x.shape[1]
    xn = FusedRMSNorm.apply(x, norm_w, 1e-6)
    q = F.linear(xn, wq).view(b, s, a, d)
    k = F.linear(xn, wk).view(b, s, g, d)
    v = F.linear(xn, wv).view(b, s, g, d)
    cc = cache[None, :, None, :]
    q = torch.view_as_real(torch.view_as_complex(q.float().reshape(b, s, a, -1, 2)) * cc).flatten(-2).type_as(q)
    k = torch.view_as_real(torch.view_as_complex(k.float().reshape(b, s, g, -1, 2)) * cc).flatten(-2).type_as(k)
    return q, k, v


class FlashAttn(torch.autograd.Function):
    """flash_attn_varlen_func forward: saves q, k, v, out, softmax_lse (fp32 [b, a, s])."""

    @staticmethod
    def forward(ctx, q, k, v, b, s):
        # q [b*s, a, d], k and v [b*s, g, d] (views as the caller passes them).
        out, lse = flash_forward(q, k, v, b, s)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError


class RowLinearAsync(torch.autograd.Function):
    """nanotron's _RowLinearAsyncCommunication (functional.py:453-472 @67c5ebb6),
    one rank: F.linear, then (with tp > 1) a reduce-scatter; saves its input as
    given, so a transposed view is not copied for backward."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return F.linear(x, w)

    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError


def sharded_cross_entropy_forward(logits, target):
    """nanotron's _ShardedCrossEntropy forward on one rank, in PyTorch ops
    (parallel/tensor_parallel/functional.py:40-85 @67c5ebb6). Returns the loss
    and what its ctx saves; run as plain ops so that the profiler sees every
    allocation and free in order (an autograd.Function lumps its frees into
    one event at its start)."""
    vocab = logits.shape[-1]
    logits_max = torch.max(logits, dim=-1)[0]
    shifted = logits - logits_max.unsqueeze(-1)  # a new fp32 tensor
    target_mask = (target < 0) | (target >= vocab)
    masked_target = target.clone()
    masked_target[target_mask] = 0
    flat = shifted.view(-1, vocab)
    masked_1d = masked_target.view(-1)
    arange = torch.arange(0, flat.shape[0])
    predicted = flat[arange, masked_1d].clone().view_as(target)
    predicted[target_mask] = 0.0
    torch.exp(shifted, out=shifted)
    sum_exp = shifted.sum(dim=-1)
    loss = torch.log(sum_exp) - predicted
    shifted.div_(sum_exp.unsqueeze(-1))
    return loss, (shifted, target_mask, masked_1d)


# ---- blocks -------------------------------------------------------------------


def nanotron_layer(h, heads, kv, ffn, s, b, tp, dtype=torch.bfloat16):
    """Saved bytes of one nanotron Llama decoder layer (ALL_REDUCE mode by shape)."""
    a, g, d, f = heads // tp, kv // tp, h // heads, ffn // tp
    p = lambda *shape: torch.randn(*shape, dtype=dtype, requires_grad=True)
    w_in, w_post = p(h), p(h)
    w_qkv, w_o, w_gu, w_down = p((a + 2 * g) * d, h), p(h, a * d), p(2 * f, h), p(h, f)
    x = torch.randn(s, b, h, dtype=dtype, requires_grad=True)
    counter = SavedCounter([w_in, w_post, w_qkv, w_o, w_gu, w_down])
    with counter.hooks():
        xn = TritonRMSNorm.apply(x, w_in, 1e-5)
        qkv = F.linear(xn, w_qkv)  # [s, b, (a + 2g) d]
        if g == a:  # MHA: one contiguous [3, b, s, a, d] copy
            q, k, v = qkv.view(s, b, 3, a, d).permute(2, 1, 0, 3, 4).contiguous()
        else:  # GQA: split, then a contiguous copy of each
            q, k, v = torch.split(qkv, [a * d, g * d, g * d], dim=-1)
            q = q.transpose(0, 1).contiguous().view(b, s, a, d)
            k = k.transpose(0, 1).contiguous().view(b, s, g, d)
            v = v.transpose(0, 1).contiguous().view(b, s, g, d)
        kvs = torch.cat([k.unsqueeze(0), v.unsqueeze(0)], dim=0).permute(1, 2, 0, 3, 4).contiguous()
        k2, v2 = torch.split(kvs, 1, dim=2)
        out = FlashAttn.apply(q.view(b * s, a, d), k2.view(b * s, g, d), v2.view(b * s, g, d), b, s)
        attn = out.contiguous().view(b, s, a * d).transpose(0, 1)
        hid = RowLinearAsync.apply(attn, w_o) + x  # tp_linear_async_communication (the benchmark config)
        hn = TritonRMSNorm.apply(hid, w_post, 1e-5)
        gate, up = torch.split(F.linear(hn, w_gu), f, dim=-1)
        y = RowLinearAsync.apply(F.silu(gate) * up, w_down) + hid
    total = counter.total()
    del y
    return total


class FusedRMSNorm(torch.autograd.Function):
    """PyTorch's fused rms_norm kernel (what nn.RMSNorm runs in torchtitan): saves x and fp32 rstd."""

    @staticmethod
    def forward(ctx, x, w, eps):
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, w, rstd)
        return (xf * rstd).to(x.dtype) * w

    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError


def hf_rmsnorm(x, w, eps=1e-6):
    """transformers' LlamaRMSNorm.forward, in its own eager ops. The mean is
    written as a sum times 1/h: torch 1.13's mean keeps its input for backward,
    where current PyTorch keeps only its sizes (derivatives.yaml, mean.dim:
    mean_backward(grad, self.sym_sizes(), dim, self.sym_numel(), keepdim))."""
    xf = x.to(torch.float32)
    variance = xf.pow(2).sum(-1, keepdim=True) * (1.0 / x.shape[-1])
    xf = xf * torch.rsqrt(variance + eps)
    return w * xf.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def llama_eager_layer(style, h, heads, kv, ffn, s, b, tp, dtype=torch.bfloat16, mlp="swiglu"):
    """Saved bytes of one eager Llama layer as HF transformers (`hf`, DeepSpeed's
    usual model) or torchtitan (`titan`, FSDP2) write it: separate q/k/v and
    gate/up projections, SwiGLU unfused; SDPA as the flash stand-in. mlp="relu2":
    Nemotron's plain MLP instead, down(relu2(up(x))) with transformers'
    ReLUSquaredActivation (relu, then torch.square)."""
    a, g, d, f = heads // tp, kv // tp, h // heads, ffn // tp
    p = lambda *shape: torch.randn(*shape, dtype=dtype, requires_grad=True)
    n1, n2 = p(h), p(h)
    wq, wk, wv, wo = p(a * d, h), p(g * d, h), p(g * d, h), p(h, a * d)
    w1, w3, w2 = p(f, h), p(f, h), p(h, f)
    pos = torch.arange(s).float()[:, None] * torch.arange(d // 2).float()[None, :] / d
    cos = torch.cat([pos.cos(), pos.cos()], -1).to(dtype)  # [s, d] buffers, not activations
    sin = torch.cat([pos.sin(), pos.sin()], -1).to(dtype)
    cache = torch.polar(torch.ones(s, d // 2), pos)  # complex64 [s, d/2]
    x = torch.randn(b, s, h, dtype=dtype, requires_grad=True)
    counter = SavedCounter([n1, n2, wq, wk, wv, wo, w1, w3, w2, cos, sin, cache])
    with counter.hooks():
        xn = hf_rmsnorm(x, n1) if style == "hf" else FusedRMSNorm.apply(x, n1, 1e-6)
        q = F.linear(xn, wq).view(b, s, a, d)
        k = F.linear(xn, wk).view(b, s, g, d)
        v = F.linear(xn, wv).view(b, s, g, d)
        if style == "hf":  # apply_rotary_pos_emb: q * cos + rotate_half(q) * sin
            c, si = cos[None, :, None, :], sin[None, :, None, :]
            q = q * c + rotate_half(q) * si
            k = k * c + rotate_half(k) * si
        else:  # torchtitan ComplexRoPE.apply_rotary_emb (rope.py:260-264)
            cc = cache[None, :, None, :]
            q = torch.view_as_real(torch.view_as_complex(q.float().reshape(b, s, a, -1, 2)) * cc).flatten(-2).type_as(q)
            k = torch.view_as_real(torch.view_as_complex(k.float().reshape(b, s, g, -1, 2)) * cc).flatten(-2).type_as(k)
        out = FlashAttn.apply(q.reshape(b * s, a, d), k.reshape(b * s, g, d), v.reshape(b * s, g, d), b, s)
        hid = x + F.linear(out.view(b, s, a * d), wo)
        hn = hf_rmsnorm(hid, n2) if style == "hf" else FusedRMSNorm.apply(hid, n2, 1e-6)
        if mlp == "relu2":
            y = hid + F.linear(torch.square(F.relu(F.linear(hn, w1))), w2)
        else:
            y = hid + F.linear(F.silu(F.linear(hn, w1)) * F.linear(hn, w3), w2)
    total = counter.total()
    del y
    return total


def titan_op_sac_layer(h, heads, kv, ffn, s, b, dtype=torch.bfloat16):
    """Bytes torchtitan's per-op selective checkpointing keeps for one Llama block (tp = 1): the block
    input, the outputs of the odd aten.mm ops PyTorch dispatches for the block's linears (a per-block
    count, as the policy's meta dict), and SDPA's outputs (the flash stand-in's output and fp32
    log-sum-exp, as _scaled_dot_product_flash_attention returns them). Ops the policy also saves
    (aten.max.default, aten.abs.default: low-precision helpers) must not occur here."""
    from torch.utils._python_dispatch import TorchDispatchMode

    a, g, d, f = heads, kv, h // heads, ffn
    p = lambda *shape: torch.randn(*shape, dtype=dtype)
    n1, n2 = p(h), p(h)
    wq, wk, wv, wo = p(a * d, h), p(g * d, h), p(g * d, h), p(h, a * d)
    w1, w3, w2 = p(f, h), p(f, h), p(h, f)
    pos = torch.arange(s).float()[:, None] * torch.arange(d // 2).float()[None, :] / d
    cache = torch.polar(torch.ones(s, d // 2), pos)
    x = torch.randn(b, s, h, dtype=dtype)
    kept = [x.numel() * x.element_size()]
    other_saved = []

    class OpPolicy(TorchDispatchMode):
        mm = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func == torch.ops.aten.mm.default:
                OpPolicy.mm += 1
                if OpPolicy.mm % 2 == 1:
                    kept.append(out.numel() * out.element_size())
            elif func in (torch.ops.aten.max.default, torch.ops.aten.abs.default):
                other_saved.append(str(func))
            return out

    with torch.no_grad():
        with OpPolicy():
            q, k, v = titan_qkv(x, n1, wq, wk, wv, cache, a, g, d)
        # Outside the policy's view: one SDPA op, whose two outputs are kept.
        out, lse = flash_forward(q.reshape(b * s, a, d), k.reshape(b * s, g, d), v.reshape(b * s, g, d), b, s)
        kept.extend([out.numel() * out.element_size(), lse.numel() * lse.element_size()])
        with OpPolicy():
            hid = x + F.linear(out.reshape(b, s, a * d), wo)
            hn = FusedRMSNorm.apply(hid, n2, 1e-6)
            hid + F.linear(F.silu(F.linear(hn, w1)) * F.linear(hn, w3), w2)
    assert OpPolicy.mm == 7, f"expected the block's 7 linears as aten.mm, saw {OpPolicy.mm}"
    assert not other_saved, f"ops the policy also keeps: {other_saved}"
    return sum(kept)


class GroupedMM(torch.autograd.Function):
    """torch._grouped_mm(A, B_t, offs) (PyTorch 2.8+, absent from this PyTorch):
    one matmul per group of rows, saving what its autograd formula reads
    (pytorch tools/autograd/derivatives.yaml, _grouped_mm: self, mat2, offs)."""

    @staticmethod
    def forward(ctx, a, b_t, offs):
        ctx.save_for_backward(a, b_t, offs)
        out, start = [], 0
        for e, end in enumerate(offs.tolist()):
            out.append(a[start:end] @ b_t[e])
            start = end
        return torch.cat(out)

    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError


def titan_moe_layer(h, heads, kv, moe_ffn, experts, top_k, shared, s, b, score="softmax", dtype=torch.bfloat16):
    """Saved bytes of one torchtitan MoE decoder layer (pytorch/torchtitan@b5bcd76c,
    torchtitan/models/common/moe.py and token_dispatcher.py), ep = 1 (the
    LocalTokenDispatcher), tp = 1: the llama3-style attention of
    llama_eager_layer('titan') with fused RMSNorms, then the router under fp32
    autocast (on CUDA, autocast to float32 casts F.linear's input and weight:
    written out here as .float(), since CPU autocast has no float32), top-k
    routing, the argsort reorder, grouped SwiGLU experts (GroupedMM stands in
    for torch._grouped_mm), the fp32 score multiply and scatter_add, and
    `shared` shared experts as one FeedForward of shared x moe_ffn."""
    a, g, d = heads, kv, h // heads
    p = lambda *shape: torch.randn(*shape, dtype=dtype, requires_grad=True)
    n1, n2 = p(h), p(h)
    wq, wk, wv, wo = p(a * d, h), p(g * d, h), p(g * d, h), p(h, a * d)
    gate = p(experts, h)
    w1, w3, w2 = p(experts, moe_ffn, h), p(experts, moe_ffn, h), p(experts, h, moe_ffn)
    fs = shared * moe_ffn
    sw1, sw3, sw2 = p(fs, h), p(fs, h), p(h, fs)
    expert_bias = torch.zeros(experts)  # a buffer (moe.py:382-386), not an activation
    pos = torch.arange(s).float()[:, None] * torch.arange(d // 2).float()[None, :] / d
    cache = torch.polar(torch.ones(s, d // 2), pos)
    x = torch.randn(b, s, h, dtype=dtype, requires_grad=True)
    counter = SavedCounter([n1, n2, wq, wk, wv, wo, gate, w1, w3, w2, sw1, sw3, sw2, cache, expert_bias])
    with counter.hooks():
        q, k, v = titan_qkv(x, n1, wq, wk, wv, cache, a, g, d)
        out = FlashAttn.apply(q.reshape(b * s, a, d), k.reshape(b * s, g, d), v.reshape(b * s, g, d), b, s)
        hid = x + F.linear(out.view(b, s, a * d), wo)
        x_td = FusedRMSNorm.apply(hid, n2, 1e-6).view(b * s, h)
        # TokenChoiceTopKRouter.forward (moe.py:290-329)
        scores = F.linear(x_td.float(), gate.float())
        scores = torch.sigmoid(scores) if score == "sigmoid" else F.softmax(scores, dim=-1)
        _, ids = torch.topk(scores + expert_bias, k=top_k, dim=-1, sorted=False)
        topk_scores = scores.gather(dim=-1, index=ids) * 1.0
        with torch.no_grad():
            routing_map = torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, ids, True)
            per_expert = routing_map.sum(dim=0)
        # LocalTokenDispatcher._local_reorder (token_dispatcher.py:93-100)
        order = torch.argsort(ids.view(-1), stable=True)
        sorted_scores = topk_scores.view(-1)[order]
        tokens = order // top_k
        routed = x_td[tokens]
        # GroupedExperts.forward (moe.py:81-108)
        offs = torch.cumsum(per_expert, dim=0, dtype=torch.int32)
        hr = F.silu(GroupedMM.apply(routed, w1.transpose(-2, -1), offs))
        hr = hr * GroupedMM.apply(routed, w3.transpose(-2, -1), offs)
        routed_out = GroupedMM.apply(hr, w2.transpose(-2, -1), offs).type_as(routed)
        # LocalTokenDispatcher.combine (token_dispatcher.py:156-169); the scatter_add's autograd saves its index
        # (ops/scatter_add.py:36-42, as torch's own scatter_add does)
        moe_out = torch.zeros_like(x_td)
        routed_out = (routed_out.to(torch.float32) * sorted_scores.reshape(-1, 1)).to(routed_out.dtype)
        moe_out = moe_out.scatter_add(0, tokens.reshape(-1, 1).expand(-1, h), routed_out)
        if shared:  # FeedForward (feed_forward.py:53-54)
            moe_out = moe_out + F.linear(F.silu(F.linear(x_td, sw1)) * F.linear(x_td, sw3), sw2)
        y = hid + moe_out.view(b, s, h)
    total = counter.total()
    del y
    return total


def deepspeed_gating(logits, top_k, cf, min_capacity=4):
    """DeepSpeed-MoE's top2gating / topkgating with sparse_routes=True and
    drop_tokens=True (deepspeedai/DeepSpeed@edaa7221 deepspeed/moe/sharded_moe.py
    :341-431, :434-525), in PyTorch ops. The means are written as sums x 1/n:
    torch 1.13's mean keeps its input for backward, current PyTorch only sizes.
    Returns the aux loss, the capacity and the [k, T] expert ids, slots and gates."""
    t, e = logits.shape
    gates = F.softmax(logits, dim=1)
    me = gates.sum(dim=0) * (1.0 / t)
    capacity = max(math.ceil(t / e * cf * top_k), min_capacity)
    if top_k == 2:
        idx1 = torch.argmax(gates, dim=1)
        mask1 = F.one_hot(idx1, num_classes=e)
        logits += -torch.log(-torch.log(torch.rand_like(logits)))  # gumbel_rsample, in place
        idx2 = torch.argmax(logits.masked_fill(mask1.bool(), float("-inf")), dim=1)
        mask2 = F.one_hot(idx2, num_classes=e)
        loc1 = torch.cumsum(mask1, dim=0) - 1
        loc2 = torch.cumsum(mask2, dim=0) - 1
        loc2 += torch.sum(mask1, dim=0, keepdim=True)
        ce = mask1.float().sum(dim=0) * (1.0 / t)
        l_aux = (me * ce).sum() * (1.0 / e) * e * e
        mask1 *= torch.lt(loc1, capacity)
        mask2 *= torch.lt(loc2, capacity)
        loc1_s = torch.sum(loc1 * mask1, dim=1)
        loc2_s = torch.sum(loc2 * mask2, dim=1)
        g1 = torch.einsum("se,se->s", gates, mask1.float())
        g2 = torch.einsum("se,se->s", gates, mask2.float())
        denom = torch.clamp(g1 + g2, min=torch.finfo(gates.dtype).eps)
        g1 /= denom
        g2 /= denom
        idx1 = torch.where(mask1.any(dim=1), idx1, torch.full_like(idx1, -1))
        idx2 = torch.where(mask2.any(dim=1), idx2, torch.full_like(idx2, -1))
        return (l_aux, capacity, torch.stack([idx1, idx2]).to(torch.int32),
                torch.stack([loc1_s, loc2_s]).to(torch.int32), torch.stack([g1, g2]))
    top_gate, top_idx = torch.topk(gates, k=top_k, dim=1)
    mask = torch.zeros_like(gates, dtype=torch.bool).scatter_(1, top_idx, 1)
    ce = mask.float().sum(dim=0) * (1.0 / t)
    l_aux = (me * ce).sum() * (1.0 / e) * e * e / top_k
    masked = torch.zeros_like(gates).scatter(1, top_idx, top_gate)
    _, cap_idx = torch.topk(masked, k=min(capacity, t), dim=0, sorted=False)
    mask &= torch.zeros_like(gates, dtype=torch.bool).scatter_(0, cap_idx, True)
    locations = torch.cumsum(mask, dim=0) - 1
    gates_masked = gates * mask
    denom = torch.clamp(torch.sum(gates_masked, dim=-1, keepdim=True), min=torch.finfo(gates.dtype).eps)
    gates_masked = gates_masked / denom
    kept = mask.gather(1, top_idx)
    stack = lambda r: r.t().contiguous()
    return (l_aux, capacity, stack(torch.where(kept, top_idx, torch.full_like(top_idx, -1))).to(torch.int32),
            stack(locations.gather(1, top_idx) * kept).to(torch.int32), stack(gates_masked.gather(1, top_idx)))


def deepspeed_moe_layer(h, heads, kv, moe_ffn, experts, top_k, cf, s, b, dtype=torch.bfloat16):
    """Saved bytes of one HF-style Llama layer whose MLP is DeepSpeed-MoE
    (deepspeed.moe.layer.MoE, ep = 1, tp = 1, drop_tokens with capacity factor
    cf) around an HF-style SwiGLU expert: TopKGate.forward (:587-591: fp32
    input and weight), the gating above, MOELayer.forward (:668-774:
    _sparse_encode / _sparse_decode index_select, the fp32 gate multiply) and
    Experts.forward (experts.py:27-37: each local expert on its slice)."""
    a, g, d = heads, kv, h // heads
    p = lambda *shape: torch.randn(*shape, dtype=dtype, requires_grad=True)
    n1, n2 = p(h), p(h)
    wq, wk, wv, wo = p(a * d, h), p(g * d, h), p(g * d, h), p(h, a * d)
    wg = p(experts, h)
    ws = [(p(moe_ffn, h), p(moe_ffn, h), p(h, moe_ffn)) for _ in range(experts)]
    pos = torch.arange(s).float()[:, None] * torch.arange(d // 2).float()[None, :] / d
    cos = torch.cat([pos.cos(), pos.cos()], -1).to(dtype)
    sin = torch.cat([pos.sin(), pos.sin()], -1).to(dtype)
    x = torch.randn(b, s, h, dtype=dtype, requires_grad=True)
    counter = SavedCounter([n1, n2, wq, wk, wv, wo, wg, cos, sin] + [w for e in ws for w in e])
    with counter.hooks():
        xn = hf_rmsnorm(x, n1)
        q = F.linear(xn, wq).view(b, s, a, d)
        k = F.linear(xn, wk).view(b, s, g, d)
        v = F.linear(xn, wv).view(b, s, g, d)
        c, si = cos[None, :, None, :], sin[None, :, None, :]
        q = q * c + rotate_half(q) * si
        k = k * c + rotate_half(k) * si
        out = FlashAttn.apply(q.reshape(b * s, a, d), k.reshape(b * s, g, d), v.reshape(b * s, g, d), b, s)
        hid = x + F.linear(out.view(b, s, a * d), wo)
        x_td = hf_rmsnorm(hid, n2).reshape(-1, h)
        logits = F.linear(x_td.float(), wg.float())
        l_aux, cap, ids, locs, gates = deepspeed_gating(logits, top_k, cf)
        t = x_td.shape[0]
        slots = torch.where(ids >= 0, ids.long() * cap + locs.long(), torch.full_like(ids.long(), experts * cap))
        source = torch.full((experts * cap + 1,), t, dtype=torch.long)
        source.scatter_(0, slots.reshape(-1), torch.arange(t).expand_as(slots).reshape(-1))
        padded = torch.cat([x_td, x_td.new_zeros(1, h)])
        dispatched = padded.index_select(0, source[:-1]).view(experts, cap, h).contiguous()
        chunks = dispatched.reshape(1, experts, -1, h).chunk(experts, dim=1)
        outs = [F.linear(F.silu(F.linear(cx, w1)) * F.linear(cx, w3), w2) for cx, (w1, w3, w2) in zip(chunks, ws)]
        expert_out = torch.cat(outs, dim=1).reshape(experts, -1, h).contiguous()
        padded_out = torch.cat([expert_out.view(experts * cap, h), expert_out.new_zeros(1, h)])
        routed = padded_out.index_select(0, slots.reshape(-1)).view(slots.size(0), t, h)
        moe_out = (routed * gates.unsqueeze(-1)).sum(0).to(dtype)
        y = hid + moe_out.view(b, s, h)
    total = counter.total()
    del y, l_aux
    return total


def gpt_layer(h, heads, ffn, s, b, tp, dtype=torch.float32):
    """Saved bytes of one eager GPT-style layer (no dropout), heads/ffn split by tp."""
    a, d, f = heads // tp, h // heads, ffn // tp
    p = lambda *shape: torch.randn(*shape, dtype=dtype, requires_grad=True)
    ln1w, ln1b, ln2w, ln2b = p(h), p(h), p(h), p(h)
    w_qkv, b_qkv, w_o, b_o = p(3 * a * d, h), p(3 * a * d), p(h, a * d), p(h)
    w1, b1, w2, b2 = p(f, h), p(f), p(h, f), p(h)
    causal = torch.ones(s, s, dtype=torch.bool).triu(1)
    x = torch.randn(s, b, h, dtype=dtype, requires_grad=True)
    counter = SavedCounter([ln1w, ln1b, ln2w, ln2b, w_qkv, b_qkv, w_o, b_o, w1, b1, w2, b2, causal])
    with counter.hooks():
        xn = F.layer_norm(x, (h,), ln1w, ln1b)
        q, k, v = F.linear(xn, w_qkv, b_qkv).split(a * d, dim=-1)
        heads_of = lambda t: t.reshape(s, b, a, d).permute(1, 2, 0, 3)  # [b, a, s, d]
        scores = heads_of(q) @ heads_of(k).transpose(-1, -2) / math.sqrt(d)
        probs = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
        ctx = (probs @ heads_of(v)).permute(2, 0, 1, 3).reshape(s, b, a * d)
        hid = F.linear(ctx, w_o, b_o) + x
        hn = F.layer_norm(hid, (h,), ln2w, ln2b)
        y = F.linear(F.gelu(F.linear(hn, w1, b1)), w2, b2) + hid
    total = counter.total()
    del y
    return total


def loss_peak(kind, h, s, b, vocab_rows, dtype):
    """Peak live bytes from the lm-head output to the end of the loss's forward."""
    hidden = torch.randn(s, b, h, dtype=dtype, requires_grad=True)
    w = torch.randn(vocab_rows, h, dtype=dtype, requires_grad=True)
    labels = torch.randint(0, vocab_rows, (s, b))

    def run():
        if kind == "nanotron":
            logits32 = F.linear(hidden, w).float()  # the bf16 output dies here
            return sharded_cross_entropy_forward(logits32, labels), logits32
        pred = F.linear(hidden, w)
        return F.cross_entropy(pred.float().view(-1, vocab_rows), labels.view(-1), reduction="sum"), pred

    # Logit-sized tensors only: the per-token row tensors (a few bytes per
    # token, under 1% here) are modelled from the code but not compared, since
    # the profiler orders events by start time and cannot place them exactly.
    # CPU kernels sometimes take a scratch buffer of their own (log_softmax's
    # threaded path does, CUDA's does not), and the start-time order puts a
    # free late now and then: single runs read 2 or 4 B per logit high in
    # about one run in eleven on a loaded machine (single-threaded too), never
    # low. The least of five runs (of three, it failed once under ctest -j2).
    big = s * b * 64
    peaks = []
    for _ in range(5):
        with torch.autograd.profiler.profile(profile_memory=True) as prof:
            # The eager loss saves log_softmax's output through autograd; nanotron's
            # forward runs as plain ops that return what its ctx would save.
            with torch.set_grad_enabled(kind != "nanotron"):
                kept = run()
        del kept
        live = peak = 0
        for e in sorted(prof.function_events, key=lambda e: e.time_range.start):
            if abs(e.self_cpu_memory_usage) >= big:
                # An op's net usage may fold in a scalar (the loss value): round
                # to 256 B, a divisor of every logit-sized tensor of these shapes.
                live += round(e.self_cpu_memory_usage / 256) * 256
                peak = max(peak, live)
        peaks.append(peak)
    return min(peaks)


def most_read(values):
    """The value most runs read, on a tie the smaller (see loss_backward_peak: a late free reads high now and then)."""
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return min(counts, key=lambda v: (-counts[v], v))


def loss_backward_peak(h, s, b, vocab_rows, dtype):
    """Peak live logit-sized bytes from the lm-head output through the loss's backward, as torchtitan
    (trainer.py: del pred, then loss.backward()) and the HF Trainer (the outputs die with compute_loss) run it.
    The profiler's events are walked as the tree they are (an op's allocations at its start, then its
    children, then its frees: autograd's evaluate_function frees the saved softmax and the incoming gradient
    after log_softmax_backward has written its output), so that events timed to the same microsecond
    cannot be put out of order."""
    hidden = torch.randn(s, b, h, dtype=dtype, requires_grad=True)
    # The lm-head weight's gradient is model state (the profiles count it as gradients), not the loss's.
    w = torch.randn(vocab_rows, h, dtype=dtype)
    labels = torch.randint(0, vocab_rows, (s, b))
    big = s * b * 64
    order = lambda e: (e.time_range.start, e.id)

    def walk(e, out):
        u = e.self_cpu_memory_usage
        u = round(u / 256) * 256 if abs(u) >= big else 0
        if u > 0:
            out.append(u)
        for c in sorted(e.cpu_children, key=order):
            walk(c, out)
        if u < 0:
            out.append(u)

    peaks = []
    for _ in range(7):
        with torch.autograd.profiler.profile(profile_memory=True) as prof:
            pred = F.linear(hidden, w)
            loss = F.cross_entropy(pred.float().view(-1, vocab_rows), labels.view(-1), reduction="sum")
            del pred
            loss.backward()
        seq = []
        for e in sorted((e for e in prof.function_events if e.cpu_parent is None), key=order):
            walk(e, seq)
        live = peak = 0
        for u in seq:
            live += u
            peak = max(peak, live)
        peaks.append(peak)
        hidden.grad = None
    # Now and then the profiler loses an op's events or times a free after a later allocation: about one run
    # in a hundred on an idle machine, either way; under a loaded ctest -j2 a free is late in up to a third of
    # the runs, reading 2 or 4 B per logit high (three of five in one run on 2026-11-27, so a median of five
    # failed). The value most runs read, of seven (on a tie the smaller): a wrong reading needs more runs with
    # a late free of one size than runs without.
    return most_read(peaks)


def titan_loss_parallel_peaks(h, s, b, vocab_rows, dtype):
    """torchtitan's vocab-parallel cross-entropy on one rank (pytorch/torchtitan@b5bcd76c
    torchtitan/components/loss.py:41-43 and _LossParallelCrossEntropy, :146-157 forward, :196-215 backward; at
    9dec370 PyTorch's loss_parallel() runs the same ops), with the trainer's `del pred` before the backward
    (trainer.py:795-799). Its three all-reduces are identities on one rank and leave the ops and what they
    allocate as they are. Run as plain ops at the top level (an autograd.Function's forward and backward would
    lump the frees of their temporaries into one event), in the order the Function and autograd run them.
    Returns the peak of live logit-sized bytes of the forward alone, and of the forward and the backward."""
    hidden = torch.randn(s * b, h, dtype=dtype)
    w = torch.randn(vocab_rows, h, dtype=dtype)
    labels = torch.randint(0, vocab_rows, (s * b,))
    big = s * b * 64

    def run(backward):
        pred = F.linear(hidden, w)  # L
        logits = pred.float()  # F: pred.to_local().float() (pred itself in fp32)
        local_max = torch.amax(logits, dim=-1, keepdim=True)
        shifted = logits - local_max
        shifted_sumexp = torch.sum(torch.exp(shifted), dim=-1, keepdim=True)
        log_probs = shifted - torch.log(shifted_sumexp)
        local_result = torch.gather(log_probs, -1, labels.unsqueeze(-1))
        loss = (-local_result.squeeze(-1)).sum()
        if not backward:
            return log_probs, loss, pred
        del logits, local_max, shifted, shifted_sumexp, local_result  # the Function returns; S = log_probs saved
        del pred, loss
        grad_output = torch.ones((), dtype=torch.float32)
        grad_input = torch.zeros_like(log_probs)
        row_idx = torch.arange(labels.shape[0])
        grad_input[row_idx, labels] = -1.0
        grad_logits = (grad_input + torch.exp(log_probs)) * grad_output
        del grad_input, log_probs  # the backward returns; autograd frees the saved S
        return grad_logits.to(dtype)  # the .float()'s backward

    def peak(backward):
        with torch.autograd.profiler.profile(profile_memory=True) as prof:
            with torch.no_grad():
                kept = run(backward)
        del kept
        live = top = 0
        for e in sorted(prof.function_events, key=lambda e: (e.time_range.start, e.id)):
            if abs(e.self_cpu_memory_usage) >= big:
                live += round(e.self_cpu_memory_usage / 256) * 256
                top = max(top, live)
        return top

    out = []
    for backward in (False, True):
        # As loss_backward_peak: the value most of seven runs read (a late free reads high now and then), on a tie
        # the smaller.
        out.append(most_read([peak(backward) for _ in range(7)]))
    return tuple(out)


def predicted(framework, style, h, heads, kv, ffn, s, b, tp, vocab, dtype, flash, moe=()):
    out = subprocess.run([PROBE, framework, style, str(h), str(heads), str(kv), str(ffn), str(s), str(b), str(tp),
                          str(vocab), dtype, "1" if flash else "0"] + [str(x) for x in moe], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    failures = 0
    rows = []
    # (h, heads, kv, ffn, s, b, vocab): small shapes that run on a CPU in seconds.
    llama_shapes = [(256, 8, 8, 688, 128, 2, 1024), (256, 8, 2, 512, 96, 1, 1536), (384, 12, 4, 1024, 64, 3, 2048)]
    gpt_shapes = [(256, 8, 8, 1024, 128, 2, 1024), (192, 6, 6, 768, 64, 3, 768), (320, 10, 10, 1280, 96, 1, 1280)]
    for (h, heads, kv, ffn, s, b, vocab) in llama_shapes:
        for tp in (1, 2):
            if kv % tp or heads % tp or ffn % tp or vocab % tp:
                continue
            meas = nanotron_layer(h, heads, kv, ffn, s, b, tp)
            pred = predicted("nanotron", "llama", h, heads, kv, ffn, s, b, tp, vocab, "bf16", True)
            rows.append(("nanotron", f"llama h{h} a{heads} g{kv} f{ffn} s{s} b{b} tp{tp}", "layer saved", meas,
                         pred["layer_saved_bytes"]))
            meas = loss_peak("nanotron", h, s, b, vocab // tp, torch.bfloat16)
            rows.append(("nanotron", f"loss h{h} s{s} b{b} V/tp {vocab // tp}", "loss peak", meas,
                         pred["loss_peak_logit_bytes"]))
    for framework, style in (("fsdp", "titan"), ("deepspeed", "hf")):
        for (h, heads, kv, ffn, s, b, vocab) in llama_shapes:
            for tp in (1, 2):
                if kv % tp:
                    continue
                meas = llama_eager_layer(style, h, heads, kv, ffn, s, b, tp)
                pred = predicted(framework, "llama", h, heads, kv, ffn, s, b, tp, vocab, "bf16", True)
                rows.append((framework, f"llama-{style} h{h} a{heads} g{kv} f{ffn} s{s} b{b} tp{tp}", "layer saved",
                             meas, pred["layer_saved_bytes"]))
    # Nemotron's squared-ReLU MLP in the HF eager layer (deepspeed profile): relu keeps its output, the square
    # its input (the same tensor), the down projection the square's output.
    for (h, heads, kv, ffn, s, b, vocab) in llama_shapes:
        for tp in (1, 2):
            if kv % tp:
                continue
            meas = llama_eager_layer("hf", h, heads, kv, ffn, s, b, tp, mlp="relu2")
            pred = predicted("deepspeed", "llama-relu2", h, heads, kv, ffn, s, b, tp, vocab, "bf16", True)
            rows.append(("deepspeed", f"relu2-hf h{h} a{heads} g{kv} f{ffn} s{s} b{b} tp{tp}", "layer saved", meas,
                         pred["layer_saved_bytes"]))
    # torchtitan's per-op selective checkpointing (fsdp, recompute=selective), tp = 1.
    for (h, heads, kv, ffn, s, b, vocab) in llama_shapes:
        meas = titan_op_sac_layer(h, heads, kv, ffn, s, b)
        pred = predicted("fsdp", "llama", h, heads, kv, ffn, s, b, 1, vocab, "bf16", True)
        rows.append(("fsdp", f"llama-titan op-SAC h{h} a{heads} g{kv} f{ffn} s{s} b{b}", "layer kept", meas,
                     pred["layer_selective_bytes"]))
    # torchtitan mixtures of experts (fsdp profile), ep = 1: (h, heads, kv, moe_ffn, experts, top-k, shared, s, b,
    # score function): Mixtral-like (softmax, top-2 of 8), Qwen3-MoE-like (softmax, top-8 of 16) and
    # DeepSeek-like (sigmoid, top-4 of 16 + 1 shared expert).
    moe_shapes = [(256, 8, 2, 448, 8, 2, 0, 96, 2, "softmax"), (192, 6, 6, 128, 16, 8, 0, 64, 3, "softmax"),
                  (256, 8, 8, 160, 16, 4, 1, 128, 1, "sigmoid")]
    for (h, heads, kv, f, e, k, sh, s, b, score) in moe_shapes:
        meas = titan_moe_layer(h, heads, kv, f, e, k, sh, s, b, score)
        pred = predicted("fsdp", "llama", h, heads, kv, f, s, b, 1, 1024, "bf16", True, (e, k, sh))
        rows.append(("fsdp", f"moe-titan h{h} a{heads} g{kv} E{e} k{k} f{f} sh{sh} s{s} b{b}", "layer saved", meas,
                     pred["layer_saved_bytes"]))
    # DeepSpeed-MoE (deepspeed profile), ep = 1, capacity factor cf, tokens x k x cf / experts whole so that the
    # experts' buffers hold exactly tokens x k x cf rows: (h, heads, kv, moe_ffn, experts, top-k, cf, s, b).
    ds_moe_shapes = [(256, 8, 2, 448, 8, 2, 1.25, 96, 2), (192, 6, 6, 128, 16, 4, 1.0, 64, 2),
                     (256, 8, 8, 160, 8, 2, 1.0, 64, 1)]
    for (h, heads, kv, f, e, k, cf, s, b) in ds_moe_shapes:
        assert (s * b * k * cf) % e == 0
        meas = deepspeed_moe_layer(h, heads, kv, f, e, k, cf, s, b)
        pred = predicted("deepspeed", "llama", h, heads, kv, f, s, b, 1, 1024, "bf16", True, (e, k, 0, cf))
        rows.append(("deepspeed", f"moe-ds h{h} a{heads} g{kv} E{e} k{k} f{f} cf{cf} s{s} b{b}", "layer saved", meas,
                     pred["layer_saved_bytes"]))
    for framework in ("fsdp", "deepspeed"):
        for (h, heads, kv, ffn, s, b, vocab) in gpt_shapes:
            for tp in (1, 2):
                meas = gpt_layer(h, heads, ffn, s, b, tp)
                pred = predicted(framework, "gpt", h, heads, kv, ffn, s, b, tp, vocab, "fp32", False)
                rows.append((framework, f"gpt h{h} a{heads} f{ffn} s{s} b{b} tp{tp}", "layer saved", meas,
                             pred["layer_saved_bytes"]))
                for dt, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
                    if framework == "fsdp" and tp > 1:
                        # torchtitan's vocab-parallel loss (the profile's loss_for(tp)).
                        pred = predicted(framework, "gpt", h, heads, kv, ffn, 4 * s, b, tp, 2 * vocab, name, False)
                        fwd, whole = titan_loss_parallel_peaks(h, 4 * s, b, 2 * vocab // tp, dt)
                        case = f"loss-parallel {name} h{h} s{4 * s} b{b} V/tp {2 * vocab // tp}"
                        rows.append((framework, case, "loss peak", fwd, pred["loss_peak_logit_bytes"]))
                        rows.append((framework, case, "loss bwd", whole, pred["loss_backward_peak_logit_bytes"]))
                        continue
                    pred = predicted(framework, "gpt", h, heads, kv, ffn, s, b, tp, vocab, name, False)
                    meas = loss_peak("eager", h, s, b, vocab // tp, dt)
                    rows.append((framework, f"loss {name} h{h} s{s} b{b} V/tp {vocab // tp}", "loss peak", meas,
                                 pred["loss_peak_logit_bytes"]))
                    # The backward at 4x the tokens and 2x the vocabulary: at the small shapes the profiler
                    # orders (or loses) microsecond-long events more often.
                    pred = predicted(framework, "gpt", h, heads, kv, ffn, 4 * s, b, tp, 2 * vocab, name, False)
                    meas = loss_backward_peak(h, 4 * s, b, 2 * vocab // tp, dt)
                    rows.append((framework, f"loss {name} h{h} s{4 * s} b{b} V/tp {2 * vocab // tp}", "loss bwd", meas,
                                 pred["loss_backward_peak_logit_bytes"]))
    # Megatron runs fused kernels (Transformer Engine, fused SwiGLU), which this
    # CPU oracle cannot run: print, tensor by tensor, where its profile departs
    # from the eager nanotron layer that was measured above.
    h, heads, kv, ffn, s, b, vocab = llama_shapes[0]
    eager = predicted("nanotron", "llama", h, heads, kv, ffn, s, b, 1, vocab, "bf16", True)
    fused = predicted("megatron", "llama", h, heads, kv, ffn, s, b, 1, vocab, "bf16", True)
    key = lambda t: (t["op"], t["tensor"])
    e_set, f_set = {key(t): t["bytes"] for t in eager["tensors"]}, {key(t): t["bytes"] for t in fused["tensors"]}
    print(f"megatron (fused) vs the measured eager nanotron layer, llama h{h} a{heads} g{kv} f{ffn} s{s} b{b}:")
    for k in sorted(set(e_set) | set(f_set)):
        if e_set.get(k) != f_set.get(k):
            print(f"  {k[0]:<16} {k[1]:<40} eager {e_set.get(k, 0):>8} megatron {f_set.get(k, 0):>8}")
    print(f"  layer total: eager {eager['layer_saved_bytes']} megatron {fused['layer_saved_bytes']}; loss peak (logits):"
          f" eager nanotron {eager['loss_peak_logit_bytes']} megatron {fused['loss_peak_logit_bytes']}")
    for fw, case, what, meas, pred in rows:
        ok = meas == pred
        failures += not ok
        print(f"{'ok  ' if ok else 'DIFF'} {fw:<9} {case:<44} {what:<11} PyTorch {meas:>10} paraplan {pred:>10}"
              + ("" if ok else f"  ({pred - meas:+d})"))
    print(f"{len(rows) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
