#pragma once
// Card profiles: total capacity as PyTorch reports it, minus a CUDA-context reserve.
#include <cstdint>
#include <string>
#include <vector>

namespace oomguard::memory {

struct CardProfile {
  std::string name;
  int64_t total_bytes;    // as torch.cuda.get_device_properties / OOM messages print it
  int64_t context_bytes;  // left to the CUDA context (kernels, cuBLAS/cuDNN handles)
  std::string note;
  int compute_capability = 0;  // 75 for sm_75: what the card's kernels and workspaces follow

  int64_t capacity_bytes() const { return total_bytes - context_bytes; }
};

// The compute capability a capacity alone (no card) is modelled with: a T4's (sm_75), the
// card oomguard's users run their CI on. Its rules (cuBLAS workspaces) follow it.
constexpr int kDefaultModelSm = 75;

// Every known card (t4, a100-40, a100-80, h200), as `--card` and OOMGUARD_CARD name them.
const std::vector<CardProfile>& card_profiles();
// Their names, comma-separated: "t4, a100-40, a100-80, h200".
std::string known_cards();
// The profile named `name`; throws std::invalid_argument listing the known names.
const CardProfile& find_card(const std::string& name);

}  // namespace oomguard::memory
