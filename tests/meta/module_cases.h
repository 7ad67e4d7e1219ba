#pragma once
// Every module of LibTorch's torch::nn (torch/nn/modules/), each a case that trains a step
// as a user's model does: made on the CPU, moved with to(device), its inputs made on the
// device. modules_test.cpp runs them; modules_check.sh runs it on the CPU and on Meta.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

namespace oomguard::meta::modules {

// A module moved to its device with the inputs of one forward there.
struct Made {
  std::shared_ptr<torch::nn::Module> module;
  std::vector<at::Tensor> inputs;                    // those whose gradients are compared
  std::function<std::vector<at::Tensor>()> forward;  // the outputs; floating ones are summed
};

struct Case {
  std::string name;    // the module ("Upsample_bicubic" for a mode of it)
  std::string family;  // where LibTorch declares it: "activation", "conv", "loss", ...
  std::function<Made(const c10::Device&)> make;
  // The operator that refuses it on Meta because a value decides a size, "" when it runs.
  std::string refused_on_meta;
  std::string note;  // what the docs' table says beside it
  // What the CPU path counts that a card does not, where it makes the CPU path measure more
  // than Meta (a CPU kernel's scratch; a tensor kept on the CPU): Meta is then held to at
  // most the CPU path's figures, not to equal them.
  std::string cpu_counts_more = {};
};

// The cases, in the order of the docs' table.
const std::vector<Case>& cases();

}  // namespace oomguard::meta::modules
