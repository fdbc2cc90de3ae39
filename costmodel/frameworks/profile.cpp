#include "costmodel/frameworks/profile.hpp"

namespace paraplan {

const Profile& profile(Framework f) {
  switch (f) {
    case Framework::kMegatron: return megatron_profile();
    case Framework::kDeepSpeed: return deepspeed_profile();
    case Framework::kFsdp: return fsdp_profile();
    case Framework::kNanotron: return nanotron_profile();
    case Framework::kParaplan: return paraplan_profile();
  }
  return megatron_profile();
}

std::int64_t bucket_params(const Profile& p, const Training& t) {
  return t.grad_bucket_params_given ? t.grad_bucket_params : p.default_bucket_params;
}

const char* framework_unsupported(const Profile& p, const Layout& l) {
  if (l.zero < 0 || l.zero > 3 || !p.zero_supported[l.zero]) return p.zero_note;
  if (!p.recompute_supported[int(l.recompute)]) return p.recompute_note;
  return nullptr;
}

}  // namespace paraplan
