#include "tests/support/fixtures.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <ATen/Context.h>
#include <ATen/Parallel.h>

namespace oomguard::testing {

void SeedingFixture::SetUp() {
  at::manual_seed(0);
  at::set_num_threads(2);
}

bool slow_tests_on() {
  const char* slow = std::getenv("OOMGUARD_SLOW");
  return slow != nullptr && std::string(slow) == "1";
}

void TrackedFixture::SetUp() {
  SeedingFixture::SetUp();
  meter().set_capacity(0);
}

void TrackedFixture::TearDown() {
  meter().set_capacity(0);
}

models::TinyGPTConfig small_model_config() {
  models::TinyGPTConfig c;
  c.d_model = 32;
  c.layers = 2;
  c.heads = 4;
  c.max_seq_len = 64;
  c.dropout = 0.1;
  return c;
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

void disable_guards_from_env(nlohmann::json& doc) {
  const char* names = std::getenv("OOMGUARD_DISABLE_GUARD");
  if (names == nullptr) {
    return;
  }
  std::stringstream list(names);
  for (std::string name; std::getline(list, name, ',');) {
    run::disable_guard(doc, name);
  }
}

}  // namespace oomguard::testing
