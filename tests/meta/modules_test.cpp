// Every module of torch::nn trains a step on device(), as a user's model does: made on the
// CPU, moved with to(device()), its forward and its backward each a measured phase. Each test
// records in its XML properties the shapes of its outputs and gradients ("shapes") and what
// the Meta device did ("meta": runs, or refused by an operator); modules_check.sh runs the
// binary on the CPU and on Meta with a card, compares the two and writes the docs' table.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ops/ones_like.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/autograd.h>

#include <oomguard/amp/cuda_autocast.h>
#include <oomguard/gtest.h>
#include <oomguard/meta/meta_device.h>
#include "tests/meta/module_cases.h"

namespace oomguard::testing {
namespace {

using meta::modules::Case;
using meta::modules::Made;

std::string describe(const at::Tensor& t) {
  if (!t.defined())
    return "none";
  std::ostringstream s;
  s << c10::toString(t.scalar_type()) << t.sizes();
  return s.str();
}

// The outputs, the parameters' gradients and the inputs' gradients, in a line.
std::string shapes(const std::vector<at::Tensor>& outputs, const Made& made) {
  std::ostringstream s;
  for (size_t i = 0; i < outputs.size(); ++i)
    s << "out" << i << "=" << describe(outputs[i]) << " ";
  for (const auto& p : made.module->named_parameters())
    s << p.key() << ".grad=" << describe(p.value().grad()) << " ";
  for (size_t i = 0; i < made.inputs.size(); ++i)
    s << "in" << i << ".grad=" << describe(made.inputs[i].grad()) << " ";
  return s.str();
}

// The floating outputs that need a gradient, and a gradient for each: ones, contiguous, as an
// upstream layer's would be (the gradient of a sum is an expanded tensor, which kernels copy
// to make contiguous where a real model's gradient needs no copy).
std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> backward_from(
    const std::vector<at::Tensor>& outputs) {
  std::vector<at::Tensor> roots, grads;
  for (const at::Tensor& out : outputs) {
    if (!out.defined() || !out.is_floating_point() || !out.requires_grad())
      continue;
    roots.push_back(out);
    grads.push_back(at::ones_like(out, at::MemoryFormat::Contiguous));
  }
  return {roots, grads};
}

// OOMGUARD_MODULES_AUTOCAST=fp16 or bf16: each forward under CUDA autocast at that dtype
// (modules_check.sh runs the cases so too).
std::optional<at::ScalarType> autocast_dtype() {
  const char* value = std::getenv("OOMGUARD_MODULES_AUTOCAST");
  const std::string precision = value == nullptr ? "" : value;
  if (precision == "fp16")
    return at::kHalf;
  if (precision == "bf16")
    return at::kBFloat16;
  return std::nullopt;
}

class EveryModule : public MemoryTest, public ::testing::WithParamInterface<size_t> {};

TEST_P(EveryModule, TrainsAStep) {
  const Case& c = meta::modules::cases()[GetParam()];
  const c10::Device where = device();
  RecordProperty("family", c.family);
  RecordProperty("note", c.note);
  RecordProperty("cpu_counts_more", c.cpu_counts_more);
  Made made;
  std::vector<at::Tensor> outputs;
  try {
    made = c.make(where);
    measure("forward", [&] {
      amp::CudaAutocast autocast(autocast_dtype());
      outputs = made.forward();
    });
    auto [roots, grads] = backward_from(outputs);
    ASSERT_FALSE(roots.empty()) << c.name << ": no output needs a gradient";
    measure("backward", [&] { torch::autograd::backward(roots, grads); });
  } catch (const std::exception& e) {
    if (autocast_dtype() && std::string(e.what()).find("unsafe to autocast") != std::string::npos) {
      RecordProperty("meta", "refused under autocast, as on a card");
      return;  // binary_cross_entropy, refused by CUDA autocast itself
    }
    const std::string op = meta::refused_operator(e);
    ASSERT_TRUE(where.is_meta()) << c.name << " failed on " << where << ": " << e.what();
    ASSERT_FALSE(op.empty()) << c.name << " failed on Meta: " << e.what();
    RecordProperty("meta", "refused by " + op);
    EXPECT_EQ(op, c.refused_on_meta)
        << c.name << " is refused on Meta by " << op << ": " << e.what();
    return;
  }
  if (where.is_meta()) {
    RecordProperty("meta", "runs");
    EXPECT_EQ(c.refused_on_meta, "")
        << c.name << " runs on Meta, where " << c.refused_on_meta << " was to refuse it";
  }
  RecordProperty("shapes", shapes(outputs, made));
  for (const auto& p : made.module->named_parameters()) {
    if (p.value().requires_grad()) {
      EXPECT_EQ(p.value().device(), where) << c.name << "." << p.key() << " was not moved";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    TorchNn,
    EveryModule,
    ::testing::Range(size_t{0}, meta::modules::cases().size()),
    [](const ::testing::TestParamInfo<size_t>& param) {
      return meta::modules::cases()[param.param].name;
    });

}  // namespace
}  // namespace oomguard::testing
