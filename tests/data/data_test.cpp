// data/: tokenizer, corpus, collator, loader, text source.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "data/collator.h"
#include "data/corpus.h"
#include "data/loader.h"
#include "data/text_source.h"
#include "data/tokenizer.h"

namespace oomguard::data {
namespace {

TEST(Tokenizer, RoundTripsBytesAndEndsWithEos) {
  const std::string text = "h\xc3\xa9llo\n";
  const auto ids = encode(text);
  ASSERT_EQ(ids.size(), text.size() + 1);
  EXPECT_EQ(ids.back(), kEosId);
  EXPECT_EQ(ids[1], 0xc3);
  EXPECT_EQ(decode(ids), text);
}

TEST(Corpus, IsSeededAndHasALongTail) {
  CorpusConfig c;
  c.num_samples = 2000;
  c.seed = 7;
  const auto a = make_synthetic_corpus(c);
  EXPECT_EQ(a, make_synthetic_corpus(c));
  c.seed = 8;
  EXPECT_NE(a, make_synthetic_corpus(c));
  const auto longer = std::count_if(a.begin(), a.end(), [&](const std::string& s) {
    return static_cast<int64_t>(s.size()) > c.max_length;
  });
  // 3% expected; a binomial over 2000 stays well inside [1%, 6%].
  EXPECT_GT(longer, 20);
  EXPECT_LT(longer, 120);
  for (const auto& s : a) {
    EXPECT_LE(static_cast<double>(s.size()), c.long_tail_factor * c.max_length);
  }
}

TEST(Collator, CutsToMaxLengthAndPadsToOneShape) {
  const std::string short_text = "abc", long_text(500, 'x');
  const Batch b = collate({&short_text, &long_text}, {/*max_length=*/16});
  ASSERT_EQ(b.input_ids.sizes(), (c10::IntArrayRef{2, 16}));
  ASSERT_EQ(b.labels.sizes(), (c10::IntArrayRef{2, 16}));
  const auto* in = b.input_ids.data_ptr<int64_t>();
  const auto* lab = b.labels.data_ptr<int64_t>();
  // "abc" + EOS: inputs a b c, labels b c EOS, then padding / ignore.
  EXPECT_EQ(in[0], 'a');
  EXPECT_EQ(lab[0], 'b');
  EXPECT_EQ(lab[2], kEosId);
  EXPECT_EQ(in[3], kPadId);
  EXPECT_EQ(lab[3], kIgnoreIndex);
  EXPECT_EQ(in[16 + 15], 'x');
  EXPECT_EQ(lab[16 + 15], 'x');
}

TEST(Collator, UntruncatedPadsToTheLongestOfTheBatch) {
  const std::string a(10, 'a'), b(40, 'b');
  const Batch batch = collate({&a, &b}, {/*max_length=*/100, /*pad_to_longest=*/true});
  // b has 40 bytes + EOS: 40 input positions.
  EXPECT_EQ(batch.input_ids.sizes(), (c10::IntArrayRef{2, 40}));
  const Batch capped = collate({&a, &b}, {/*max_length=*/16, /*pad_to_longest=*/true});
  EXPECT_EQ(capped.input_ids.size(1), 16);
}

// The truncate guard's structural check: whatever the samples, no batch is longer than
// max_length, and a truncating collator gives exactly max_length.
TEST(Collator, NeverExceedsMaxLength) {
  CorpusConfig c;
  c.num_samples = 400;
  c.max_length = 32;
  c.long_tail_fraction = 0.2;
  const auto corpus = make_synthetic_corpus(c);
  for (size_t i = 0; i + 4 <= corpus.size(); i += 4) {
    const std::vector<const std::string*> batch = {
        &corpus[i], &corpus[i + 1], &corpus[i + 2], &corpus[i + 3]};
    EXPECT_EQ(collate(batch, {c.max_length, false}).input_ids.size(1), c.max_length);
    EXPECT_LE(collate(batch, {c.max_length, true}).input_ids.size(1), c.max_length);
  }
}

// Only max_length + 1 bytes of a sample can reach a batch, so the collator reads no more:
// the batch of an enormous line is the batch of its first max_length + 1 bytes.
TEST(Collator, ReadsNoMoreOfASampleThanReachesTheBatch) {
  const std::string enormous(1 << 20, 'y'), prefix = enormous.substr(0, 17), short_text = "ab";
  for (const bool pad_to_longest : {false, true}) {
    const Batch a = collate({&enormous, &short_text}, {16, pad_to_longest});
    const Batch b = collate({&prefix, &short_text}, {16, pad_to_longest});
    EXPECT_TRUE(a.input_ids.equal(b.input_ids));
    EXPECT_TRUE(a.labels.equal(b.labels));
  }
}

TEST(Loader, OrderDependsOnSeedAndCoversEveryEpoch) {
  std::vector<std::string> samples;
  for (int i = 0; i < 16; ++i)
    samples.push_back("sample " + std::to_string(i));
  Loader a(samples, 4, 1, {8}), b(samples, 4, 1, {8}), c(samples, 4, 2, {8});
  std::vector<size_t> seen_a, seen_c;
  for (int i = 0; i < 4; ++i) {
    a.next();
    b.next();
    c.next();
    EXPECT_EQ(a.last_indices(), b.last_indices());
    seen_a.insert(seen_a.end(), a.last_indices().begin(), a.last_indices().end());
    seen_c.insert(seen_c.end(), c.last_indices().begin(), c.last_indices().end());
  }
  EXPECT_NE(seen_a, seen_c);
  std::sort(seen_a.begin(), seen_a.end());
  for (size_t i = 0; i < 16; ++i)
    EXPECT_EQ(seen_a[i], i);
}

TEST(Loader, AGivenOrderIsTakenAsGivenAndAgainFromItsStart) {
  std::vector<std::string> samples;
  for (int i = 0; i < 6; ++i)
    samples.push_back(std::string(static_cast<size_t>(i + 1), 'x'));
  Loader loader(samples, 2, /*seed=*/9, {8, /*pad_to_longest=*/true}, {5, 0, 2});
  const Batch first = loader.next();
  EXPECT_EQ(loader.last_indices(), (std::vector<size_t>{5, 0}));
  EXPECT_EQ(first.input_ids.size(1), 6);  // padded to sample 5's 6 bytes
  loader.next();
  EXPECT_EQ(loader.last_indices(), (std::vector<size_t>{2, 5}));
  EXPECT_THROW(Loader(samples, 2, 0, {8}, {6}), c10::Error);
}

// data.sample_lengths: those samples of lengths the generator can draw, their text still from
// the seed, every other sample as drawn. No drawn corpus holds a longer sample than the longest.
TEST(Corpus, SampleLengthsAreDrawableAndLeaveTheRestAsDrawn) {
  CorpusConfig config;
  config.num_samples = 2000;
  config.long_tail_fraction = 0.5;
  const int64_t longest = longest_synthetic_length(config);
  EXPECT_EQ(longest, 768);  // 6 x 128: rounding of the draw just below 1 reaches it
  for (uint64_t seed = 0; seed < 5; ++seed) {
    config.seed = seed;
    for (const std::string& s : make_synthetic_corpus(config))
      ASSERT_LE(static_cast<int64_t>(s.size()), longest);
  }
  const auto drawn = make_synthetic_corpus(config);
  config.sample_lengths = {{3, longest}, {7, 300}};
  const auto lengthened = make_synthetic_corpus(config);
  for (size_t i = 0; i < drawn.size(); ++i) {
    if (i == 3 || i == 7)
      EXPECT_EQ(static_cast<int64_t>(lengthened[i].size()), i == 3 ? longest : 300);
    else
      ASSERT_EQ(lengthened[i], drawn[i]) << "sample " << i << " changed";
  }
  std::string ranges;
  EXPECT_TRUE(drawable_length(config, 300, &ranges));
  EXPECT_FALSE(drawable_length(config, 200));
  EXPECT_FALSE(drawable_length(config, longest + 1));
  EXPECT_EQ(ranges, "32 .. 115 or 256 .. 768 bytes");
  config.long_tail_fraction = 0.0;
  EXPECT_EQ(longest_synthetic_length(config), 115);  // 0.9 x 128, truncated
  EXPECT_FALSE(drawable_length(config, 300));
}

TEST(TextSource, ReadsJsonlAndRejectsBadFiles) {
  const std::string path = ::testing::TempDir() + "/samples.jsonl";
  std::ofstream(path) << "{\"text\": \"one\"}\n\n{\"text\": \"two\"}\n";
  EXPECT_EQ(read_samples(path), (std::vector<std::string>{"one", "two"}));
  std::ofstream(path) << "{\"body\": \"one\"}\n";
  EXPECT_THROW(read_samples(path), std::invalid_argument);
  EXPECT_THROW(read_samples(::testing::TempDir() + "/missing.txt"), std::invalid_argument);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace oomguard::data
