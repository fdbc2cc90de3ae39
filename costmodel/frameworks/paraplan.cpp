// paraplan's own executor (validate/): what `validate` runs and measures. Its
// sources are this repository's files.
#include "costmodel/frameworks/profile.hpp"
#include "costmodel/memory.hpp"

namespace paraplan {

namespace {

void state(const Training& t, const Layout& l, StateBuffers* out) {
  // Rajbhandari et al. 2020 §5: (2 + 2 + K)Ψ, split by ZeRO stage.
  out->add({Category::kWeights, l.zero >= 3 ? "parameters (ZeRO-3 shard)" : "parameters", double(dtype_bytes(t.precision)),
            l.zero >= 3, "validate/params.cpp"});
  out->add({Category::kGradients, l.zero >= 2 ? "gradients (ZeRO-2 shard)" : "gradients", double(dtype_bytes(t.grad_dtype)),
            l.zero >= 2, "validate/params.cpp"});
  out->add({Category::kOptimizer, t.optimizer == OptimizerKind::kAdam ? "Adam state" : "SGD state", t.optimizer_state_bytes,
            l.zero >= 1, "validate/params.cpp"});
}

}  // namespace

const Profile& paraplan_profile() {
  static const Profile p = [] {
    Profile p{
      Framework::kParaplan,
      "paraplan",
      "paraplan's own executor (validate): every buffer explicit, grads in grad_dtype, ZeRO as in the paper",
      {true, true, true, true},
      "",
      {true, true, true},
      "",
      state,
      ActivationVariant{false, "validate/layer.cpp", false, "validate/layer.cpp", false, "validate/layer.cpp",
                        "validate/layer.cpp (Korthikanti et al. 2022 §4 op list)", false, "validate/layer.cpp"},
      LossVariant{true, false, false, 16, "validate/head.cpp (logits, then fp32 max | sum | target | loss per token)", false,
                  "the executor frees nothing before the loss", 0, "", 0, "", false},
      true,
      "validate/layer.cpp",
      0,
      "the executor's collectives are synchronous (validate/comm.hpp)",
      BucketRule::kShardedGrads,
      40'000'000,
      "validate/params.cpp",
      2,
      0,
      false,
      "validate/params.cpp"};
    // The GPU backend's own buffers outside its pool (validate/gpu/cuda_context.cpp:70-75):
    // the cuBLAS workspace (cudaMalloc + cublasSetWorkspace) and a 16 MiB device scratch.
    p.cublas_workspace_in_allocator = false;
    p.runtime_extra_mib = 16;
    p.runtime_extra = "validate/gpu/cuda_context.cpp:75 (device scratch, kScratchBytes)";
    p.moe_note = "paraplan's executor (validate) runs dense layers only";
    p.time.tp_backward = "validate/comm.hpp (the executor's TP collectives run in line, none beside a GEMM)";
    p.terms = TermSources{4, "validate/head.cpp:17-24 (int32 token ids), validate/executor.cpp:18-28",
                          "validate/head.cpp (the final norm's and the output layer's inputs)",
                          "validate/executor.cpp:118-119 (one send slot per direction)",
                          "validate/executor.cpp:103 (the tied embedding gradient kept whole), :271",
                          "validate/head.cpp:27-34 (the tp partial sum), :41-42 (dropout mask)"};
    return p;
  }();
  return p;
}

}  // namespace paraplan
