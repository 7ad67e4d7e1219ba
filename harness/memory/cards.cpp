#include <oomguard/memory/cards.h>

#include <stdexcept>

namespace oomguard::memory {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t GiB(double g) {
  return static_cast<int64_t>(g * 1024.0) * kMiB;
}
// What a CUDA context with cuBLAS and cuDNN handles typically holds outside the caching
// allocator; stated, not measured per card (an H200 with torch 2.11 and CUDA 13.0 had
// 527 MiB in use before the first allocation: ci/gpu-sanity.sh).
constexpr int64_t kContextReserve = 512 * kMiB;

}  // namespace

const std::vector<CardProfile>& card_profiles() {
  static const std::vector<CardProfile> profiles = {
      {"t4",
       GiB(14.75),
       kContextReserve,
       "Colab/Kaggle T4s report 14.75 GiB; some images report 15.75 GiB: use --capacity",
       75},
      {"a100-40", GiB(39.50), kContextReserve, "as its OOM message prints it", 80},
      {"a100-80", GiB(79.25), kContextReserve, "as its OOM message prints it", 80},
      {"h200",
       150109880320,  // measured: ci/gpu-sanity.sh, torch 2.11.0+cu130, driver 580.159.04
       kContextReserve,
       "an H200 as PyTorch reports it (get_device_properties, cudaMemGetInfo): "
       "150,109,880,320 B, 139.80 GiB; nvidia-smi's 143771 MiB is more than PyTorch can see",
       90},
  };
  return profiles;
}

std::string known_cards() {
  std::string known;
  for (const auto& card : card_profiles())
    known += (known.empty() ? "" : ", ") + card.name;
  return known;
}

const CardProfile& find_card(const std::string& name) {
  for (const auto& card : card_profiles())
    if (card.name == name)
      return card;
  throw std::invalid_argument("unknown card \"" + name + "\"; known cards: " + known_cards());
}

}  // namespace oomguard::memory
