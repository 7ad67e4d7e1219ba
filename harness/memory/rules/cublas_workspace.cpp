// The cublas_workspace rule (sim::cublas_workspace): a CUDA run's cuBLAS handles each take a
// workspace at their first GEMM and keep it for the life of the process. A training step has
// two handles, the forward thread's and autograd's backward thread's, so the model allocates
// one at the end of the first GEMM (aten::mm, addmm, bmm, ...) outside autograd's backward
// and one at the end of the first inside it.
#include <vector>

#include <ATen/record_function.h>

#include "harness/memory/rules/gpu_rule.h"

namespace oomguard::memory {
namespace {

class CublasWorkspaceRule final : public GpuRule {
 public:
  explicit CublasWorkspaceRule(RuleModels& models) : models_(models), held_(models.size()) {}

  bool hears(const char* name) const override { return is_gemm(name); }

  void on_operator_end(const at::RecordFunction&, bool inside_backward) override {
    for (size_t i = 0; i < models_.size(); ++i) {
      const int64_t bytes = models_.target(i).workspace.bytes_per_handle;
      bool& taken = inside_backward ? held_[i].backward : held_[i].forward;
      // Kept for the life of the process, as the handle pool keeps it: never freed. Refused,
      // it is asked for again at the next GEMM, as PyTorch keeps only a workspace it got.
      if (taken || bytes <= 0 || !models_.serve(i, card_only_id(), bytes))
        continue;
      taken = true;
      held_[i].bytes += bytes;
    }
  }

  std::optional<sim::RuleEffect> effect(size_t i) const override {
    const sim::CublasWorkspace& rule = models_.target(i).workspace;
    if (rule.bytes_per_handle <= 0)
      return std::nullopt;
    return sim::RuleEffect{"cublas_workspace", held_[i].bytes, rule.describe()};
  }

  Workspaces held(size_t i) const { return held_.at(i); }

 private:
  RuleModels& models_;
  std::vector<Workspaces> held_;  // per target
};

}  // namespace

std::unique_ptr<GpuRule> cublas_workspace_rule(RuleModels& models) {
  for (size_t i = 0; i < models.size(); ++i)
    if (models.target(i).workspace.bytes_per_handle > 0)
      return std::make_unique<CublasWorkspaceRule>(models);
  return nullptr;
}

Workspaces workspaces(const GpuRule& rule, size_t i) {
  const auto* workspace = dynamic_cast<const CublasWorkspaceRule*>(&rule);
  return workspace != nullptr ? workspace->held(i) : Workspaces{};
}

}  // namespace oomguard::memory
