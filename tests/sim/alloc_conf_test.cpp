// harness/sim/alloc_conf: the allocator's settings, checked per LibTorch version.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include <oomguard/sim/alloc_conf.h>

namespace oomguard::sim {
namespace {

constexpr TorchVersion kTorch215{2, 15}, kTorch113{1, 13}, kTorch26{2, 6};

TEST(AllocConf, AcceptsWhatTheAllocatorUnderstands) {
  for (const char* ok :
       {"",
        "expandable_segments:True",
        "expandable_segments:True,max_split_size_mb:128",
        "garbage_collection_threshold:0.6,max_split_size_mb:64",
        "roundup_power2_divisions:4",
        "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
        "backend:cudaMallocAsync",
        "pinned_num_register_threads:8"}) {
    EXPECT_NO_THROW(validate_alloc_conf(ok, kTorch215)) << ok;
  }
  EXPECT_NO_THROW(validate_alloc_conf("roundup_bypass_threshold_mb:256", kTorch113));
}

struct BadConf {
  const char* conf;
  TorchVersion torch;
  const char* message_part;
};

TEST(AllocConf, RejectsNamingTheOptionAndWhatIsAllowed) {
  const BadConf cases[] = {
      {"foo:1", kTorch215, "unknown option foo"},
      {"expandable_segments:true", kTorch215, "expected True or False"},
      {"expandable_segments:True",
       kTorch113,
       "unknown option expandable_segments for LibTorch 1.13"},
      {"max_split_size_mb:20", kTorch215, "an integer > 20"},
      {"max_split_size_mb", kTorch215, "is not key:value"},
      {"garbage_collection_threshold:1.0", kTorch215, "strictly between 0 and 1"},
      {"roundup_power2_divisions:3", kTorch215, "power of two"},
      {"roundup_power2_divisions:[300:1]", kTorch215, "power of two"},
      {"max_non_split_rounding_mb:64", TorchVersion{2, 4}, "unknown option"},
      {"roundup_bypass_threshold_mb:64", kTorch26, "unknown option"},
      {"expandable_segments:True,,", kTorch215, "is not key:value"},
  };
  for (const auto& c : cases) {
    try {
      validate_alloc_conf(c.conf, c.torch);
      ADD_FAILURE() << c.conf << ": accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(c.message_part), std::string::npos)
          << c.conf << ": " << e.what();
    }
  }
}

TEST(AllocConf, ReadsEachOptionIntoTheSettings) {
  const AllocatorSettings s = read_alloc_conf(
      "max_split_size_mb:128,garbage_collection_threshold:0.6,backend:cudaMallocAsync,"
      "roundup_power2_divisions:[2:1,>:4],pinned_num_register_threads:8",
      kTorch215);
  EXPECT_EQ(s.max_split_size, 128 * kMiB);
  EXPECT_DOUBLE_EQ(s.garbage_collection_threshold, 0.6);
  EXPECT_TRUE(s.cuda_malloc_async);
  EXPECT_EQ(s.roundup_divisions[0], 1);  // below the first key: its divisions
  EXPECT_EQ(s.roundup_divisions[1], 4);  // from the last key's interval on: ">"
  EXPECT_EQ(s.roundup_divisions[kRoundupIntervals - 1], 4);
  EXPECT_FALSE(s.expandable_segments);
  EXPECT_EQ(s.torch_version, kLatestModelled);  // past the latest modelled: as it
  EXPECT_EQ(read_alloc_conf("", kTorch113).torch_version, 113);
  // Per-size divisions arrived in 2.1: refused for 1.13 by the same reading.
  EXPECT_THROW(
      read_alloc_conf("roundup_power2_divisions:[256:1]", kTorch113), std::invalid_argument);
}

TEST(AllocConf, NamesTheVariableEachVersionReadsFirst) {
  EXPECT_STREQ(alloc_conf_variable(kTorch113), "PYTORCH_CUDA_ALLOC_CONF");
  EXPECT_STREQ(alloc_conf_variable(TorchVersion{2, 8}), "PYTORCH_CUDA_ALLOC_CONF");
  EXPECT_STREQ(alloc_conf_variable(kTorch215), "PYTORCH_CUDA_ALLOC_CONF");
  // 2.9 and later read PYTORCH_ALLOC_CONF too (2.9's CUDA allocator does not): both are set.
  EXPECT_EQ(alloc_conf_variables(TorchVersion{2, 8}).size(), 1U);
  const auto both = alloc_conf_variables(TorchVersion{2, 9});
  ASSERT_EQ(both.size(), 2U);
  EXPECT_STREQ(both[0], "PYTORCH_CUDA_ALLOC_CONF");
  EXPECT_STREQ(both[1], "PYTORCH_ALLOC_CONF");
}

std::string effect(const char* conf, int64_t segments, int64_t expandable) {
  return expandable_segments_effect(read_alloc_conf(conf, kTorch215), segments, expandable);
}

TEST(AllocConf, SaysWhetherExpandableSegmentsTookEffect) {
  // As an H200 run with torch 2.11 read it back: in effect.
  EXPECT_EQ(effect("expandable_segments:True", 2, 2), "in effect: 2 of 2 segments expandable");
  // 2.9.1 with the setting in PYTORCH_ALLOC_CONF alone (pytorch/pytorch#183387): ignored.
  EXPECT_EQ(
      effect("max_split_size_mb:64,expandable_segments:True", 13, 0),
      "not in effect: expandable_segments:True was asked, but 0 of 13 segments expandable");
  EXPECT_EQ(
      effect("expandable_segments:True", 0, 0), "unknown: the allocator held no segment when read");
  EXPECT_EQ(effect("", 13, 0), "");
  EXPECT_EQ(effect("expandable_segments:False", 3, 0), "");
  EXPECT_NE(effect("", 2, 2).find("a setting from elsewhere"), std::string::npos);
}

}  // namespace
}  // namespace oomguard::sim
