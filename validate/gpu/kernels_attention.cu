// Launchers of the attention kernels: the plans of attention_kernels.cuh
// (bodies, description, dispatch on the head width) on a grid of 4-warp blocks.
#include "validate/gpu/attention_kernels.cuh"
#include "validate/gpu/kernels_launch.cuh"

namespace paraplan::validate::cuda {
namespace {

using namespace attn;

struct GpuLaunch {
  cudaStream_t st;
  const char* what;
  template <class... K, class... A>
  void operator()(void (*kernel)(K...), i64 items, const A&... args) const {
    if (items <= 0) return;
    const i64 blocks = (items + kWarpsPerBlock - 1) / kWarpsPerBlock;
    kernel<<<unsigned(blocks < kMaxBlocks ? blocks : kMaxBlocks), kWarp * kWarpsPerBlock, 0, st>>>(args...);
    check_launch(what);
  }
};

}  // namespace

void attention_probs(DRef qkv, const Attn& a, DRef probs, cudaStream_t st) {
  probs_plan(GpuLaunch{st, "attention_probs"}, qkv, a, probs);
}

void attention_pv(DRef probs, DRef qkv, const Attn& a, DRef out, cudaStream_t st) {
  pv_plan(GpuLaunch{st, "attention_pv"}, probs, qkv, a, out);
}

void attention_backward(DRef qkv, DRef probs, const std::uint8_t* mask, DRef dropped, float p, DRef dout,
                        const Attn& a, DRef dqkv, cudaStream_t st) {
  backward_plan(GpuLaunch{st, "attention_backward"}, qkv, probs, mask, dropped, p, dout, a, dqkv);
}

void flash_attention_forward(DRef qkv, const Attn& a, DRef out, float* lse, cudaStream_t st) {
  flash_forward_plan(GpuLaunch{st, "flash_attention_forward"}, qkv, a, out, lse);
}

void flash_attention_backward(DRef qkv, DRef out, const float* lse, DRef dout, const Attn& a, DRef dqkv,
                              cudaStream_t st) {
  flash_backward_plan(GpuLaunch{st, "flash_attention_backward"}, qkv, out, lse, dout, a, dqkv);
}

}  // namespace paraplan::validate::cuda
