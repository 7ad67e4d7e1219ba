// harness/run/config: strict validation, table-driven.
#include <gtest/gtest.h>

#include "harness/run/config.h"

namespace oomguard::run {
namespace {

struct BadCase {
  const char* name;
  const char* json;
  const char* message_part;  // the error must name this
};

TEST(Config, DefaultLoadsAndSetsOverride) {
  const RunConfig c = load_config(nlohmann::json::object());
  EXPECT_GT(c.budgets.train, 0);
  nlohmann::json doc = nlohmann::json::object();
  apply_set(doc, "train.steps=7");
  apply_set(doc, "budget.train=1GiB");
  const RunConfig d = load_config(doc);
  EXPECT_EQ(d.train.steps, 7);
  EXPECT_EQ(d.budgets.train, 1ll << 30);
}

// The embedded document is the one place defaults live: every struct that a config builds
// defaults to what the document says, so code that builds one by hand gets the same run.
TEST(Config, StructDefaultsAreTheDocumentsDefaults) {
  const RunConfig doc = load_config(nlohmann::json::object());
  const models::TinyGPTConfig model;
  EXPECT_EQ(model.max_seq_len, doc.model.max_seq_len);
  EXPECT_EQ(model.d_model, doc.model.d_model);
  EXPECT_EQ(model.layers, doc.model.layers);
  EXPECT_EQ(model.heads, doc.model.heads);
  EXPECT_EQ(model.mlp_ratio, doc.model.mlp_ratio);
  EXPECT_EQ(model.dropout, doc.model.dropout);
  EXPECT_EQ(model.attention_dropout, doc.model.attention_dropout);
  const Guards guards;
  for (const auto& g : guard_table())
    EXPECT_EQ(guards.*g.flag, doc.guards.*g.flag) << "guards." << g.name;
  const RunConfig plain;
  EXPECT_EQ(plain.batch_size, doc.batch_size);
  EXPECT_EQ(plain.max_length, doc.max_length);
  const data::CorpusConfig corpus;
  EXPECT_EQ(corpus.num_samples, doc.corpus.num_samples);
  EXPECT_EQ(corpus.max_length, doc.corpus.max_length);
  EXPECT_EQ(corpus.long_tail_fraction, doc.corpus.long_tail_fraction);
  EXPECT_EQ(corpus.long_tail_factor, doc.corpus.long_tail_factor);
  EXPECT_EQ(corpus.sample_lengths, doc.corpus.sample_lengths);
  EXPECT_TRUE(doc.train_order.empty());
  EXPECT_TRUE(doc.evaluate_order.empty());
  const phases::TrainConfig train;
  EXPECT_EQ(train.steps, doc.train.steps);
  EXPECT_EQ(train.lr, doc.train.lr);
  EXPECT_EQ(train.weight_decay, doc.train.weight_decay);
  EXPECT_EQ(train.grad_clip, doc.train.grad_clip);
  EXPECT_EQ(phases::EvaluateConfig{}.batches, doc.evaluate.batches);
  const phases::GenerateConfig generate;
  EXPECT_EQ(generate.prompts, doc.generate.prompts);
  EXPECT_EQ(generate.prompt_length, doc.generate.prompt_length);
  EXPECT_EQ(generate.max_new_tokens, doc.generate.max_new_tokens);
  EXPECT_EQ(generate.greedy, doc.generate.greedy);
  EXPECT_EQ(generate.temperature, doc.generate.temperature);
}

TEST(Config, RejectsBadInputNamingTheKey) {
  const BadCase cases[] = {
      {"unknown key", R"({"model": {"width": 3}})", "model.width"},
      {"unknown section", R"({"optim": {}})", "optim"},
      {"wrong type", R"({"train": {"steps": "ten"}})", "train.steps"},
      {"float for integer", R"({"train": {"steps": 1.5}})", "train.steps"},
      {"zero size", R"({"model": {"d_model": 0}})", "model.d_model"},
      {"negative", R"({"data": {"batch_size": -1}})", "data.batch_size"},
      {"absurd", R"({"model": {"layers": 100000}})", "model.layers"},
      {"heads not dividing", R"({"model": {"d_model": 30, "heads": 4}})", "model.heads"},
      {"max_length below 2", R"({"data": {"max_length": 1}})", "data.max_length"},
      {"bad budget", R"({"budget": {"train": "lots"}})", "budget.train"},
      {"lengths in a file",
       R"({"data": {"sample_lengths": [[1, 40]], "file": "a.txt"}})",
       "data.sample_lengths"},
      {"undrawable length", R"({"data": {"sample_lengths": [[1, 200]]}})", "256 .. 768"},
      {"not a pair", R"({"data": {"sample_lengths": [1]}})", "data.sample_lengths"},
      {"negative index", R"({"data": {"train_order": [0, -1]}})", "data.train_order"},
      {"index past the corpus",
       R"({"data": {"samples": 4, "evaluate_order": [4]}})",
       "data.evaluate_order"},
  };
  for (const auto& c : cases) {
    try {
      load_config(nlohmann::json::parse(c.json));
      ADD_FAILURE() << c.name << ": accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(c.message_part), std::string::npos)
          << c.name << ": " << e.what();
    }
  }
}

TEST(Config, SetIntoAValueIsAConfigError) {
  // Found by fuzzing (tests/fuzz/corpus/config/set_into_a_value): this escaped as a JSON
  // library type_error instead of a message naming the key.
  nlohmann::json doc = nlohmann::json::object();
  apply_set(doc, "model=1");
  try {
    apply_set(doc, "model.heads=2");
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model is set to a value"), std::string::npos) << e.what();
  }
}

TEST(Config, SetValueMustBeUtf8) {
  // Found by fuzzing: such a value escaped as a JSON type_error when a message printed it.
  nlohmann::json doc = nlohmann::json::object();
  EXPECT_THROW(apply_set(doc, "data.file=\x93\xff"), ConfigError);
  EXPECT_THROW(apply_set(doc, "model.d_model.d_\xff=1"), ConfigError);  // in a key too
  apply_set(doc, "data.file=caf\xc3\xa9.txt");                          // UTF-8 is fine
  EXPECT_EQ(doc["data"]["file"], "caf\xc3\xa9.txt");
}

}  // namespace
}  // namespace oomguard::run
