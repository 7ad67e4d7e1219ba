#include "tests/support/fixtures.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

namespace oomguard::testing {

void SeedingFixture::SetUp() {
  at::manual_seed(0);
  at::set_num_threads(2);
}

void TrackedFixture::SetUp() {
  SeedingFixture::SetUp();
  meter().set_capacity(0);
}

void TrackedFixture::TearDown() {
  meter().set_capacity(0);
}

run::RunConfig small_config(const nlohmann::json& extra) {
  nlohmann::json doc = {
      {"model", {{"d_model", 32}, {"layers", 2}, {"heads", 2}}},
      {"data", {{"samples", 64}, {"max_length", 32}, {"batch_size", 4}}},
      {"train", {{"steps", 4}}},
      {"evaluate", {{"batches", 2}}},
      {"generate", {{"prompts", 2}, {"prompt_length", 8}, {"max_new_tokens", 8}}}};
  doc.merge_patch(extra);
  return run::load_config(doc);
}

}  // namespace oomguard::testing
