// The pickle reader (harness/sim/pickle.h): plain data from Python's pickler (protocol 4)
// and LibTorch's TorchScript pickler (protocol 2, type tags), shared values kept shared, and
// everything else refused at its byte offset. The byte strings were written by
// pickle.dumps(value, protocol) and by torch._C._pickle_save (its data.pkl).
#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>

#include "harness/sim/pickle.h"

namespace oomguard::sim {
namespace {

template <size_t N>
std::string_view bytes(const char (&literal)[N]) {
  return {literal, N - 1};
}

// pickle.dumps({'x': [1, -1, 2**40, -2**63, 1.5, None, True, False, 'é'], 'y': (1, 2)}, 4)
constexpr char kPython4[] =
    "\x80\x04\x95"
    "A\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01x\x94]\x94("
    "K\x01J\xff\xff\xff\xff\x8a\x06\x00\x00\x00\x00\x00\x01\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80"
    "G\x3f\xf8\x00\x00\x00\x00\x00\x00N\x88\x89\x8c\x02\xc3\xa9\x94"
    "e\x8c\x01y\x94K\x01K\x02\x86\x94u.";
// torch._C._pickle_save({'a': 1, 'b': 2}): restore_type_tag(dict, "Dict[str, int]")
constexpr char kTorchScriptDict[] =
    "\x80\x02"
    "ctorch.jit._pickle\nrestore_type_tag\nq\x00}(X\x01\x00\x00\x00"
    "aq\x01K\x01X\x01"
    "\x00\x00\x00"
    "bq\x02K\x02uX\x0e\x00\x00\x00"
    "Dict[str, int]q\x03\x86R.";
// torch._C._pickle_save([1, 2, 3]): build_intlist([1, 2, 3])
constexpr char kTorchScriptIntList[] =
    "\x80\x02"
    "ctorch.jit._pickle\nbuild_intlist\nq\x00(](K\x01K\x02K\x03"
    "etR.";
// l = [1]; pickle.dumps([l, l], 4): the second is a memo reference to the first
constexpr char kShared[] =
    "\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00]\x94(]\x94K\x01"
    "ah\x01"
    "e.";
// l = []; l.append(l); pickle.dumps(l, 4)
constexpr char kCycle[] =
    "\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00]\x94h\x00"
    "a.";
// pickle.dumps(os.getcwd, 2): a GLOBAL that unpickling would call
constexpr char kCallsCode[] =
    "\x80\x02"
    "cposix\x0agetcwd\x0aq\x00.";
// pickle.dumps({1.5: 1}, 4), pickle.dumps({7: "a"}, 4)
constexpr char kFloatKey[] =
    "\x80\x04\x95\x0f\x00\x00\x00\x00\x00\x00\x00}\x94G\x3f\xf8\x00\x00\x00\x00\x00\x00K\x01s.";
constexpr char kIntKey[] =
    "\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00}\x94K\x07\x8c\x01"
    "a\x94s.";

TEST(PickleTest, ReadsPlainDataOfProtocol4) {
  const Pickle p(bytes(kPython4));
  EXPECT_EQ(
      p.to_json(p.root()),
      nlohmann::json::parse(
          R"({"x": [1, -1, 1099511627776, -9223372036854775808, 1.5, null, true, false, "é"],
              "y": [1, 2]})"));
}

TEST(PickleTest, ReadsTheTorchScriptPicklersTypeTagsAsTheirValues) {
  const Pickle dict(bytes(kTorchScriptDict));
  EXPECT_EQ(dict.to_json(dict.root()), nlohmann::json::parse(R"({"a": 1, "b": 2})"));
  const Pickle list(bytes(kTorchScriptIntList));
  EXPECT_EQ(list.to_json(list.root()), nlohmann::json::parse("[1, 2, 3]"));
}

TEST(PickleTest, KeepsASharedValueOnce) {
  const Pickle p(bytes(kShared));
  ASSERT_EQ(p.root().children.size(), 2u);
  EXPECT_EQ(p.root().children[0], p.root().children[1]);
  EXPECT_EQ(p.to_json(p.root()), nlohmann::json::parse("[[1], [1]]"));
}

TEST(PickleTest, LooksUpDictKeysAndTurnsIntegerKeysIntoText) {
  const Pickle p(bytes(kTorchScriptDict));
  ASSERT_NE(p.get(p.root(), "b"), nullptr);
  EXPECT_EQ(p.get(p.root(), "b")->integer, 2);
  EXPECT_EQ(p.get(p.root(), "c"), nullptr);
  const Pickle ints(bytes(kIntKey));
  EXPECT_EQ(ints.to_json(ints.root()), nlohmann::json::parse(R"({"7": "a"})"));
}

TEST(PickleTest, ReadsBackWhatItWrites) {
  // Past the 1000 items a batch of APPENDS / SETITEMS holds, and every kind of value.
  nlohmann::json doc = {
      {"ints", {0, -1, 2147483647, -2147483648LL, 1LL << 40, INT64_MIN}},
      {"real", 0.1},
      {"flags", {true, false, nullptr}},
      {"text", "é\u00e9 \"quoted\""}};
  for (int i = 0; i < 2500; ++i) {
    doc["list"].push_back(i);
    doc["dict"]["k" + std::to_string(i)] = i;
  }
  const std::string bytes = write_pickle(doc);
  const Pickle p(bytes);
  EXPECT_EQ(p.to_json(p.root()), doc);
}

// A snapshot repeats its keys and actions in every entry: each distinct string is written
// once, then fetched from the memo (more than 256 of them, so both memo-index widths).
TEST(PickleTest, WriterSharesRepeatedStrings) {
  nlohmann::json doc = nlohmann::json::array();
  for (int i = 0; i < 2000; ++i)
    doc.push_back({{"action", "alloc"}, {"tag", "block" + std::to_string(i % 300) + ".mlp"}});
  const std::string bytes = write_pickle(doc);
  const Pickle p(bytes);
  EXPECT_EQ(p.to_json(p.root()), doc);
  size_t actions = 0;
  for (size_t at = bytes.find("alloc"); at != std::string::npos; at = bytes.find("alloc", at + 1))
    ++actions;
  EXPECT_EQ(actions, 1u);
  EXPECT_LT(bytes.size(), 2000u * 16);
}

// The streaming writer lays out what write_pickle lays out for the same data, and refuses to
// close what is not open or to finish with a container open.
TEST(PickleTest, StreamingWriterMatchesTheDocumentWriter) {
  nlohmann::json doc = {{"list", nlohmann::json::array()}, {"n", -5}, {"x", 1.5}};
  for (int i = 0; i < 2100; ++i)
    doc["list"].push_back({{"k", i}, {"big", int64_t{1} << 40}, {"none", nullptr}});
  PickleWriter w;
  w.begin_dict();
  w.string("list");
  w.begin_list();
  for (int i = 0; i < 2100; ++i) {
    w.begin_dict();
    w.string("big");
    w.integer(int64_t{1} << 40);
    w.string("k");
    w.integer(i);
    w.string("none");
    w.none();
    w.end();
  }
  w.end();
  w.string("n");
  w.integer(-5);
  w.string("x");
  w.number(1.5);
  w.end();
  EXPECT_EQ(w.finish(), write_pickle(doc));

  PickleWriter unbalanced;
  EXPECT_THROW(unbalanced.end(), std::logic_error);
  unbalanced.begin_dict();
  unbalanced.string("key");
  EXPECT_THROW(unbalanced.end(), std::logic_error);
  unbalanced.integer(1);
  unbalanced.begin_list();
  EXPECT_THROW(unbalanced.finish(), std::logic_error);
}

TEST(PickleTest, ReadsAnUnsigned64BitValueAsPyTorchWritesASizeT) {
  // 2**64 - 1 (size_t(-1), PyTorch's unknown line) as Python pickles it: LONG1 of 9 bytes,
  // the last the sign byte 0x00.
  static const char kMaxSizeT[] = "\x80\x04\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00.";
  const std::string bytes(kMaxSizeT, sizeof(kMaxSizeT) - 1);
  const Pickle pickle(bytes);
  EXPECT_EQ(pickle.root().kind, PickleValue::Kind::kInt);
  EXPECT_TRUE(pickle.root().unsigned_64);
  EXPECT_EQ(pickle.to_json(pickle.root()), nlohmann::json(UINT64_MAX));
  // 2**63 - 1 takes 8 bytes and stays signed.
  static const char kInt64Max[] = "\x80\x04\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f.";
  const std::string signed_bytes(kInt64Max, sizeof(kInt64Max) - 1);
  const Pickle signed_max(signed_bytes);
  EXPECT_FALSE(signed_max.root().unsigned_64);
  EXPECT_EQ(signed_max.root().integer, INT64_MAX);
}

TEST(PickleTest, ACycleIsAnErrorWhenExpanded) {
  const Pickle p(bytes(kCycle));  // reading it is fine: one list that holds itself
  EXPECT_THROW(p.to_json(p.root()), PickleError);
}

struct RefusedCase {
  const char* name;
  std::string_view bytes;
  const char* message;  // what() in full
};

class PickleRefusalTest : public ::testing::TestWithParam<RefusedCase> {};

TEST_P(PickleRefusalTest, NamesTheByteOffset) {
  try {
    Pickle p(GetParam().bytes);
    FAIL() << "read without an error";
  } catch (const PickleError& e) {
    EXPECT_STREQ(e.what(), GetParam().message);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases,
    PickleRefusalTest,
    ::testing::Values(
        RefusedCase{
            "empty", "", "at byte 0: not a pickle of protocol 2 or later (no PROTO opcode)"},
        RefusedCase{
            "code",
            bytes(kCallsCode),
            "at byte 2: global posix.getcwd would run code; a memory snapshot holds plain data "
            "only"},
        RefusedCase{
            "float_key",
            bytes(kFloatKey),
            "at byte 24: a dict key that is neither a string nor an integer"},
        RefusedCase{
            "truncated",
            bytes(kPython4).substr(0, 30),
            "at byte 28: the pickle ends inside this opcode's argument (truncated file?)"},
        RefusedCase{
            "wide_int",
            // 2**64 as LONG1: 9 bytes, the last not a sign byte (the literal's NULs kept).
            std::string_view("\x80\x04\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", 14),
            "at byte 2: an integer wider than 64 bits"},
        RefusedCase{
            "two_values", "\x80\x04K\x01K\x02.", "at byte 6: STOP with 2 values on the stack"},
        RefusedCase{
            "bytes_object",
            "\x80\x04"
            "C\x01"
            "a.",
            "at byte 2: opcode 0x43 is not one that plain data of protocol 2 or later uses"},
        RefusedCase{"bad_utf8", "\x80\x04\x8c\x01\xff.", "at byte 2: a string that is not UTF-8"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace oomguard::sim
