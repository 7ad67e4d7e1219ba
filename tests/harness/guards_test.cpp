// harness/run/guards: each guard proven by a test that fails without it, and the flaky OOM of
// DESIGN.md reproduced: unguarded peaks depend on the seed, guarded ones do not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include <c10/core/GradMode.h>

#include "data/corpus.h"
#include "data/tokenizer.h"
#include <oomguard/memory/sizes.h>
#include "tests/support/fixtures.h"

namespace oomguard::run {
namespace {

// The default configuration, its budgets included, with two train steps instead of 30:
// AdamW's state exists from the first step, so evaluate and generate start from the same
// baseline as in a full run, and the second step reaches the full run's train peak.
nlohmann::json short_default(nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json doc = {{"train", {{"steps", 2}}}};
  doc.merge_patch(extra);
  return doc;
}

nlohmann::json guard_off(const char* name) {
  return {{"guards", {{name, false}}}};
}

// Whether any generation prompt of `seed` comes from a long-tail sample.
bool prompts_from_long_tail(const RunConfig& config, uint64_t seed) {
  data::CorpusConfig corpus = config.corpus;
  corpus.seed = seed;
  const auto samples = data::make_synthetic_corpus(corpus);
  const auto sources = phases::prompt_sources(samples, config.generate);
  return std::any_of(sources.begin(), sources.end(), [&](const std::string* s) {
    return static_cast<int64_t>(s->size()) > config.max_length;
  });
}

const PhaseReport& phase(const RunReport& report, const std::string& name) {
  for (const auto& p : report.phases) {
    if (p.memory.name == name) {
      return p;
    }
  }
  throw std::out_of_range("no phase " + name + " in the report");
}

class GuardTest : public testing::TrackedFixture {
 protected:
  RunReport run(const nlohmann::json& doc, uint64_t seed) {
    RunOptions options;
    options.seed = seed;
    RunReport report = smoke_run(load_config(doc), meter(), options);
    std::printf("seed %llu:", static_cast<unsigned long long>(seed));
    for (const auto& p : report.phases) {
      std::printf(
          " %s %s (%s)",
          p.memory.name.c_str(),
          memory::format_size(p.memory.peak_allocated_bytes).c_str(),
          memory::to_string(p.status));
    }
    std::printf("\n");
    return report;
  }
};

TEST_F(GuardTest, NoGradEvalKeepsEvaluateWithinBudget) {
  for (uint64_t seed : {0, 1}) {
    EXPECT_EQ(phase(run(short_default(), seed), "evaluate").status, memory::PhaseStatus::kPass);
    const RunReport off = run(short_default(guard_off("no_grad_eval")), seed);
    EXPECT_EQ(phase(off, "evaluate").status, memory::PhaseStatus::kBudgetExceeded)
        << "seed " << seed;
  }
}

// Structural: inside evaluate grad mode is off and no output carries a grad_fn. The same
// observer sees both when the guard is off, so the check can fail.
TEST_F(GuardTest, GuardedEvaluateRecordsNoGraph) {
  const RunConfig config = testing::small_config();
  models::TinyGPTConfig model_config = config.model;
  model_config.vocab_size = data::kVocabSize;
  models::TinyGPT model(model_config);
  const auto samples = data::make_synthetic_corpus(config.corpus);
  for (const bool no_grad : {true, false}) {
    data::Loader loader(samples, config.batch_size, 0, {config.max_length});
    phases::EvaluateConfig e = config.evaluate;
    e.no_grad = no_grad;
    int batches = 0;
    e.on_batch = [&](const at::Tensor& logits) {
      ++batches;
      EXPECT_EQ(c10::GradMode::is_enabled(), !no_grad);
      EXPECT_EQ(logits.grad_fn() != nullptr, !no_grad);
      EXPECT_EQ(model->is_training(), !no_grad);  // unguarded, dropout stays on
    };
    phases::evaluate(model, loader, e);
    EXPECT_EQ(batches, config.evaluate.batches);
  }
}

// Untruncated, a batch holding a long-tail sample (2x..6x max_length) pads every sample to
// it; train and evaluate exceed their budgets exactly on the seeds whose batches caught one.
TEST_F(GuardTest, TruncateKeepsTrainAndEvaluateWithinBudget) {
  const int64_t max_length = load_config(short_default()).max_length;
  int long_train = 0, long_eval = 0, short_eval = 0;
  for (uint64_t seed = 0; seed < 12 && (long_train == 0 || long_eval == 0 || short_eval == 0);
       ++seed) {
    const RunReport off = run(short_default(guard_off("truncate")), seed);
    for (const char* name : {"train", "evaluate"}) {
      const PhaseReport& p = phase(off, name);
      const bool caught_long_tail = p.results.at("longest_batch").get<int64_t>() > max_length;
      EXPECT_EQ(
          p.status,
          caught_long_tail ? memory::PhaseStatus::kBudgetExceeded : memory::PhaseStatus::kPass)
          << name << ", seed " << seed;
      if (std::string(name) == "train")
        long_train += caught_long_tail ? 1 : 0;
      else
        (caught_long_tail ? long_eval : short_eval) += 1;
    }
    EXPECT_EQ(run(short_default(), seed).outcome, memory::PhaseStatus::kPass)
        << "guarded, seed " << seed;
  }
  // The seeds tried must include both cases, or the test proved nothing.
  EXPECT_GT(long_train, 0);
  EXPECT_GT(long_eval, 0);
  EXPECT_GT(short_eval, 0);
}

// Uncapped, generation runs until the prompt's source sample would end: long on the seeds
// whose prompts come from the long tail, and only there.
TEST_F(GuardTest, MaxNewTokensKeepsGenerateWithinBudget) {
  const RunConfig config = load_config(short_default());
  std::vector<uint64_t> long_seeds, short_seeds;
  for (uint64_t seed = 0; seed < 200 && (long_seeds.size() < 2 || short_seeds.empty()); ++seed) {
    auto& list = prompts_from_long_tail(config, seed) ? long_seeds : short_seeds;
    if (list.size() < 2)
      list.push_back(seed);
  }
  ASSERT_EQ(long_seeds.size(), 2u);
  ASSERT_FALSE(short_seeds.empty());
  for (uint64_t seed : long_seeds) {
    EXPECT_EQ(
        phase(run(short_default(guard_off("max_new_tokens")), seed), "generate").status,
        memory::PhaseStatus::kBudgetExceeded)
        << "seed " << seed;
    EXPECT_EQ(phase(run(short_default(), seed), "generate").status, memory::PhaseStatus::kPass)
        << "seed " << seed;
  }
  EXPECT_EQ(
      phase(run(short_default(guard_off("max_new_tokens")), short_seeds[0]), "generate").status,
      memory::PhaseStatus::kPass);
}

TEST_F(GuardTest, GradCheckpointKeepsTrainWithinBudget) {
  EXPECT_EQ(phase(run(short_default(), 0), "train").status, memory::PhaseStatus::kPass);
  EXPECT_EQ(
      phase(run(short_default(guard_off("grad_checkpoint")), 0), "train").status,
      memory::PhaseStatus::kBudgetExceeded);
}

// Checkpointed, every block keeps only its input, and backward recomputes one block at a
// time: the train peak falls by at least (L - 1) blocks' saved activations less the L saved
// inputs, counted from the shapes (models::block_saved_bytes_per_token). At 8 layers and
// T = 256 the checkpointed peak is at most 0.45x the plain one.
TEST_F(GuardTest, GradCheckpointCutsTheTrainPeakByAtLeastThePrediction) {
  const nlohmann::json deep = {
      {"model", {{"layers", 8}}},
      {"data", {{"max_length", 256}}},
      {"train", {{"steps", 2}}},
      {"evaluate", {{"batches", 0}}},
      {"generate", {{"max_new_tokens", 1}}}};
  nlohmann::json deep_plain = deep;
  deep_plain.merge_patch(guard_off("grad_checkpoint"));
  const RunReport with = run(short_default(deep), 0);
  const RunReport without = run(short_default(deep_plain), 0);
  const int64_t peak_with = phase(with, "train").memory.peak_allocated_bytes;
  const int64_t peak_without = phase(without, "train").memory.peak_allocated_bytes;

  const RunConfig config = load_config(short_default(deep));
  const int64_t L = config.model.layers, C = config.model.d_model;
  const int64_t tokens = config.batch_size * config.max_length;
  const int64_t predicted_saving =
      ((L - 1) * models::block_saved_bytes_per_token(config.model, config.max_length) - L * 4 * C) *
      tokens;
  const int64_t saving = peak_without - peak_with;
  std::printf(
      "train peak %s plain, %s checkpointed (%.3fx); saving %s, predicted at least %s "
      "(%.1f%% of the plain peak; measured %.1f%%)\n",
      memory::format_size(peak_without).c_str(),
      memory::format_size(peak_with).c_str(),
      static_cast<double>(peak_with) / static_cast<double>(peak_without),
      memory::format_size(saving).c_str(),
      memory::format_size(predicted_saving).c_str(),
      100.0 * static_cast<double>(predicted_saving) / static_cast<double>(peak_without),
      100.0 * static_cast<double>(saving) / static_cast<double>(peak_without));
  EXPECT_GE(saving, predicted_saving);
  EXPECT_LE(static_cast<double>(peak_with), 0.45 * static_cast<double>(peak_without));
}

// Structural: the guarded cache holds prompt + max_new_tokens positions and no more.
TEST_F(GuardTest, KvCapHoldsTheCacheToPromptPlusMaxNewTokens) {
  const RunConfig config = load_config(short_default());
  const RunReport report = run(short_default(), 0);
  const PhaseReport& g = phase(report, "generate");
  const int64_t capacity = config.generate.prompt_length + config.generate.max_new_tokens;
  EXPECT_EQ(g.results.at("kv_cache_capacity").get<int64_t>(), capacity);
  EXPECT_LE(g.results.at("max_sequence_length").get<int64_t>(), capacity);
  // layers x (K, V) x [B, H, capacity, Dh] fp32
  EXPECT_EQ(
      g.results.at("kv_cache_bytes").get<int64_t>(),
      config.model.layers * 2 * config.generate.prompts * config.model.d_model * capacity * 4);
}

// The flaky OOM: with every guard off the evaluate and generate peaks depend on the seed
// (which batches and prompts caught the long tail); guarded they agree to within 2%. A proof
// over seeds, ten runs: slow (each guard's own test above runs always).
TEST_F(GuardTest, UnguardedPeaksDependOnTheSeedGuardedOnesDoNot) {
  OOMGUARD_SKIP_UNLESS_SLOW();
  nlohmann::json all_off = nlohmann::json::object();
  disable_guard(all_off, "all");
  // Seeds 0..3 and the first seed whose prompts come from the long tail.
  std::vector<uint64_t> seeds = {0, 1, 2, 3};
  const RunConfig config = load_config(short_default());
  for (uint64_t seed = 4; seed < 200; ++seed) {
    if (prompts_from_long_tail(config, seed)) {
      seeds.push_back(seed);
      break;
    }
  }
  ASSERT_EQ(seeds.size(), 5u);
  std::map<std::string, std::vector<int64_t>> guarded, unguarded;
  for (uint64_t seed : seeds) {
    for (const auto& p : run(short_default(), seed).phases)
      guarded[p.memory.name].push_back(p.memory.peak_allocated_bytes);
    for (const auto& p : run(short_default(all_off), seed).phases)
      unguarded[p.memory.name].push_back(p.memory.peak_allocated_bytes);
  }
  const auto ratio = [](const std::vector<int64_t>& v) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return static_cast<double>(*hi) / static_cast<double>(*lo);
  };
  for (const char* name : {"train", "evaluate", "generate"}) {
    ASSERT_EQ(guarded[name].size(), seeds.size()) << name;
    EXPECT_LE(ratio(guarded[name]), 1.02) << name;
  }
  ASSERT_EQ(unguarded["evaluate"].size(), seeds.size());
  ASSERT_EQ(unguarded["generate"].size(), seeds.size());
  EXPECT_GT(ratio(unguarded["evaluate"]), 1.2);
  EXPECT_GT(ratio(unguarded["generate"]), 1.2);
}

}  // namespace
}  // namespace oomguard::run
