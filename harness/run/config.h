#pragma once
// Run configuration: one JSON document (the embedded default) lists every key; a user
// config or --set overrides keys of it. Validation is strict: an unknown key, a wrong type
// or an out-of-range value throws ConfigError naming the key and what is allowed.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/corpus.h"
#include "harness/phases/phases.h"
#include "harness/run/guards.h"
#include "harness/usage_error.h"
#include "models/tiny_gpt.h"

namespace oomguard::run {

// A config key or value that cannot be used: a usage error (exit code 2).
using ConfigError = UsageError;

struct Budgets {
  int64_t train = 0, evaluate = 0, generate = 0;  // peak allocated bytes allowed per phase
};

struct RunConfig {
  models::TinyGPTConfig model;
  data::CorpusConfig corpus;
  std::string data_file;  // empty: the synthetic corpus
  // data.train_order, data.evaluate_order: the sample indices each loader takes, in order and
  // again from the start when they run out; empty: shuffled from the seed, once per epoch.
  std::vector<size_t> train_order, evaluate_order;
  int64_t batch_size = 8;
  int64_t max_length = 128;
  phases::TrainConfig train;
  phases::EvaluateConfig evaluate;
  phases::GenerateConfig generate;
  Budgets budgets;
  Guards guards;
  int64_t threads = 0;  // 0: one per core
  // memory.alloc_conf: CUDA caching allocator settings, validated for the LibTorch in use;
  // put into its environment variable before CUDA starts (harness/cli/run_command.cpp).
  std::string alloc_conf;
  nlohmann::json resolved;  // the validated document, for the report
};

// The embedded default document.
const nlohmann::json& default_config();
// Overlays `overrides` on the default, validates and builds the config.
RunConfig load_config(const nlohmann::json& overrides);
// Applies "a.b.c=value" to `doc`; value is parsed as JSON, else taken as a string.
void apply_set(nlohmann::json& doc, const std::string& assignment);
// Throws ConfigError when data.train_order, data.evaluate_order or data.sample_lengths name a
// sample past `samples` (the synthetic corpus's data.samples, or a data file's count).
void check_sample_indices(const RunConfig& config, size_t samples);
// Sets guards.<name> to false in `doc`; "all" names every guard. Unknown names throw.
void disable_guard(nlohmann::json& doc, const std::string& name);

}  // namespace oomguard::run
