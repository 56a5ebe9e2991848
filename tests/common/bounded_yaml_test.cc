// The shared YAML loader: exact expanded sizes, every limit refused with its
// place, and hostile shapes (alias bombs, recursion, depth) refused quickly.
#include "common/bounded_yaml.h"

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::yaml {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

Limits Generous() {
  Limits limits;
  limits.max_bytes = 1 << 20;
  limits.max_nodes = 10000;
  return limits;
}

TEST(CommonBoundedYamlTest, PlainDocumentLoadsAndIsMeasured) {
  const std::string text = "name: demo\nitems: [a, bb, ccc]\nnested: {k: v}\n";
  Measure measure;
  absl::StatusOr<YAML::Node> node = LoadBounded(text, "t.yaml", Generous(), &measure);
  ASSERT_THAT(node, IsOk());
  EXPECT_EQ((*node)["items"][2].Scalar(), "ccc");
  // name demo items a bb ccc nested k v
  EXPECT_EQ(measure.expanded_bytes, 4u + 4 + 5 + 1 + 2 + 3 + 6 + 1 + 1);
  // root map, 3 keys, 3 values of which the list holds 3 and the map 2
  EXPECT_EQ(measure.nodes, 1u + 3 + 3 + 3 + 2);
  EXPECT_EQ(measure.max_depth, 2u);
  EXPECT_LE(measure.expanded_bytes, text.size());
}

TEST(CommonBoundedYamlTest, AliasesCountWhatTheyRepeat) {
  Measure measure;
  ASSERT_THAT(LoadBounded("a: &x abc\nb: *x\nc: *x\n", "t.yaml", Generous(), &measure), IsOk());
  EXPECT_EQ(measure.expanded_bytes, 3u * (1 + 3));
  EXPECT_EQ(measure.nodes, 1u + 6);

  // An alias of a collection repeats the collection's node and all it holds.
  ASSERT_THAT(LoadBounded("a: &l [x, yy]\nb: *l\n", "t.yaml", Generous(), &measure), IsOk());
  EXPECT_EQ(measure.expanded_bytes, 1u + 3 + 1 + 3);
  EXPECT_EQ(measure.nodes, 1u + (1 + 3) + (1 + 3));
}

TEST(CommonBoundedYamlTest, AliasOfALargeStringPastTheLimitIsRefusedWithItsLine) {
  // The hostile policy in miniature: one anchored string, many aliases of it.
  Limits limits = Generous();
  limits.max_bytes = 64 * 1024;
  std::string text = "big: &big " + std::string(16 * 1024, 'x') + "\nnotes:\n";
  for (int i = 0; i < 100; ++i) text += "  - *big\n";
  ASSERT_LT(text.size(), limits.max_bytes);
  EXPECT_THAT(LoadBounded(text, "policy.yaml", limits),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("policy.yaml:5:5: "),
                             HasSubstr("more than 65536 bytes of text once aliases are expanded"),
                             HasSubstr("alias *big repeats 16384 bytes"),
                             HasSubstr("count against the size limit"))));
}

TEST(CommonBoundedYamlTest, BillionLaughsIsRefusedAtOnce) {
  // Ten levels of ten aliases each: 10^10 nodes if anything expanded them.
  std::string text = "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int level = 1; level <= 10; ++level) {
    const std::string below = absl::StrCat("*l", level - 1);
    text += absl::StrCat("l", level, ": &l", level, " [");
    for (int i = 0; i < 10; ++i) text += absl::StrCat(i ? ", " : "", below);
    text += "]\n";
  }
  const absl::Time start = absl::Now();
  EXPECT_THAT(LoadBounded(text, "bomb.yaml", Generous()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("bomb.yaml:"), HasSubstr("more than 10000 nodes"))));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

TEST(CommonBoundedYamlTest, RecursiveAliasIsRefused) {
  EXPECT_THAT(LoadBounded("a: &self [1, *self]\n", "t.yaml", Generous()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("t.yaml:1:14: alias *self refers to a node that "
                                       "contains it"),
                             HasSubstr("recursive"))));
  EXPECT_THAT(LoadBounded("m: &m {k: *m}\n", "t.yaml", Generous()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("contains it")));
}

TEST(CommonBoundedYamlTest, TooManyNodesWithoutAnyAliasIsRefused) {
  // yaml-cpp builds ~0.5 KB a node: "a," a node is a 250x blow-up.
  std::string text = "[";
  for (int i = 0; i < 20000; ++i) text += "a,";
  text += "a]";
  EXPECT_THAT(LoadBounded(text, "t.yaml", Generous()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("t.yaml:1:"), HasSubstr("more than 10000 nodes"))));
}

TEST(CommonBoundedYamlTest, DeepNestingIsRefused) {
  Limits limits = Generous();
  limits.max_depth = 8;
  EXPECT_THAT(LoadBounded("[[[[[[[[x]]]]]]]]", "t.yaml", limits), IsOk());
  EXPECT_THAT(LoadBounded("[[[[[[[[[x]]]]]]]]]", "t.yaml", limits),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("t.yaml:1:9: nested more than 8 mappings and lists deep")));
  // Far past yaml-cpp's own recursion guard: still our message, still quick.
  EXPECT_THAT(LoadBounded(std::string(100000, '['), "t.yaml", Generous()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested more than 64")));
}

TEST(CommonBoundedYamlTest, TextOverTheLimitIsRefusedBeforeParsing) {
  Limits limits = Generous();
  limits.max_bytes = 10;
  EXPECT_THAT(LoadBounded("key: 0123456789", "t.yaml", limits),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("t.yaml: 15 bytes of YAML; at most 10 are accepted")));
}

TEST(CommonBoundedYamlTest, SyntaxErrorsNameThePlaceAndCarryNoControlCharacters) {
  EXPECT_THAT(LoadBounded("a: [1, 2\n", "t.yaml", Generous()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("t.yaml:"), HasSubstr("not valid YAML"))));
  // yaml-cpp quotes the offending byte of a bad escape in its message.
  absl::StatusOr<YAML::Node> bad_escape =
      LoadBounded(std::string("a: \"\\\x01\"\n"), "t.yaml", Generous());
  ASSERT_THAT(bad_escape,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid YAML")));
  for (char c : bad_escape.status().message()) {
    EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << bad_escape.status();
  }
}

TEST(CommonBoundedYamlTest, EmptyTextIsANullNode) {
  absl::StatusOr<YAML::Node> node = LoadBounded("", "t.yaml", Generous());
  ASSERT_THAT(node, IsOk());
  EXPECT_TRUE(node->IsNull());
}

// A second document was dropped without a word (yaml-cpp's Load reads the
// first): a rollout after '---' was never applied, and `apply --prune` took
// it for one no file declares.
TEST(CommonBoundedYamlTest, ASecondDocumentIsRefusedNamingWhereItBegins) {
  EXPECT_THAT(LoadBounded("a: b\n---\n[1, 2, 3, 4, 5]\n", "t.yaml", Generous()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("t.yaml:2:1: a second YAML document begins here")));
  EXPECT_THAT(LoadBounded("---\na: b\n...\n---\nc: d\n", "t.yaml", Generous()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("second YAML document")));
  // One document, with its markers or without, is fine.
  for (const char* text : {"a: b\n", "---\na: b\n", "---\na: b\n...\n", "a: b\n# ---\n"}) {
    absl::StatusOr<YAML::Node> node = LoadBounded(text, "t.yaml", Generous());
    ASSERT_THAT(node, IsOk()) << text;
    EXPECT_EQ((*node)["a"].Scalar(), "b") << text;
  }
}

TEST(CommonBoundedYamlTest, CancelStopsTheLoad) {
  std::atomic<bool> cancel{true};
  Limits limits = Generous();
  limits.max_nodes = 1 << 20;
  limits.cancel = &cancel;
  std::string text = "[";
  for (int i = 0; i < 50000; ++i) text += "a,";
  text += "a]";
  EXPECT_THAT(LoadBounded(text, "t.yaml", limits),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("t.yaml")));
  cancel = false;
  EXPECT_THAT(LoadBounded(text, "t.yaml", limits), IsOk());
}

TEST(CommonBoundedYamlTest, PlaceCountsFromOne) {
  YAML::Mark mark;
  mark.line = 0;
  mark.column = 4;
  EXPECT_EQ(Place("f.yaml", mark), "f.yaml:1:5");
  EXPECT_EQ(Place("f.yaml", YAML::Mark::null_mark()), "f.yaml");
  EXPECT_THAT(Place("f.yaml", mark), Not(HasSubstr("\n")));
}

}  // namespace
}  // namespace weightpath::yaml
