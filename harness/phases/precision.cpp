// train.precision's names, apart from the training loop: the config parser (and its fuzz
// target, which builds without the phases) reads them.
#include "harness/phases/phases.h"

namespace oomguard::phases {

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::kFp16Amp:
      return "fp16-amp";
    case Precision::kBf16Amp:
      return "bf16-amp";
    case Precision::kFp32:
      break;
  }
  return "fp32";
}

std::optional<Precision> parse_precision(const std::string& name) {
  for (const Precision p : {Precision::kFp32, Precision::kFp16Amp, Precision::kBf16Amp})
    if (name == precision_name(p))
      return p;
  return std::nullopt;
}

}  // namespace oomguard::phases
