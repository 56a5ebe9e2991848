// The strict reader every YAML document goes through after the bounded
// loader: each fault names file:line:column and the key path, unknown and
// repeated keys are refused, and each typed read refuses the other kinds.
#include "common/strict_yaml.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bounded_yaml.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::yaml {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

constexpr absl::string_view kTopKeys[] = {"name", "count", "ratio", "enabled", "timeout",
                                          "tags", "nested", "items"};

YAML::Node Load(const std::string& text, size_t max_depth = 64) {
  Limits limits;
  limits.max_bytes = 1 << 16;
  limits.max_nodes = 1000;
  limits.max_depth = max_depth;
  absl::StatusOr<YAML::Node> node = LoadBounded(text, "t.yaml", limits);
  EXPECT_THAT(node, IsOk());
  return node.ok() ? *node : YAML::Node();
}

// Reads `key` of the document's top mapping with `read`, returning its
// status (the value is checked by the callers that want it).
template <typename ReadFn>
absl::Status ReadTop(const std::string& text, absl::string_view key, ReadFn read) {
  const Reader reader("t.yaml");
  absl::StatusOr<Map> map = Map::Read(reader, Load(text), "", kTopKeys);
  if (!map.ok()) return map.status();
  absl::StatusOr<const Entry*> entry = map->Require(key);
  if (!entry.ok()) return entry.status();
  return read(reader, **entry).status();
}

TEST(CommonStrictYamlTest, TypedFieldsAreRead) {
  const Reader reader("t.yaml");
  const YAML::Node root = Load(
      "name: demo\ncount: 12\nratio: 0.25\nenabled: true\ntimeout: 500ms\ntags: [a, b]\n"
      "nested: {inner: x}\nitems:\n  - 1\n  - 2\n");
  absl::StatusOr<Map> map = Map::Read(reader, root, "", kTopKeys);
  ASSERT_THAT(map, IsOk());
  EXPECT_EQ(*ReadString(reader, *map->Find("name")), "demo");
  EXPECT_EQ(*ReadUint32(reader, *map->Find("count")), 12u);
  EXPECT_EQ(*ReadInt64(reader, *map->Find("count"), -5, 12), 12);
  EXPECT_DOUBLE_EQ(*ReadDouble(reader, *map->Find("ratio")), 0.25);
  EXPECT_TRUE(*ReadBool(reader, *map->Find("enabled")));
  EXPECT_EQ(*ReadPositiveDuration(reader, *map->Find("timeout")), absl::Milliseconds(500));
  EXPECT_THAT(*ReadStringList(reader, *map->Find("tags")), ElementsAre("a", "b"));
  EXPECT_THAT(*ReadStringList(reader, *map->Find("name")), ElementsAre("demo"));

  absl::StatusOr<Map> nested = Map::Read(reader, *map->Find("nested"), {"inner"});
  ASSERT_THAT(nested, IsOk());
  EXPECT_EQ(nested->path(), "nested");
  EXPECT_EQ(nested->Find("inner")->path, "nested.inner");

  absl::StatusOr<std::vector<Entry>> items = ReadList(reader, *map->Find("items"));
  ASSERT_THAT(items, IsOk());
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[1].path, "items[1]");
  EXPECT_EQ(*ReadUint32(reader, (*items)[1]), 2u);
  EXPECT_EQ(map->Find("absent"), nullptr);
}

TEST(CommonStrictYamlTest, UnknownKeyNamesItsPlaceAndTheAllowedKeys) {
  const Reader reader("t.yaml");
  EXPECT_THAT(Map::Read(reader, Load("name: a\n  # note\nnmae: b\n"), "", {"name", "count"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:3:1: nmae: unknown key 'nmae' (allowed: name, count)"));
  const YAML::Node nested = Load("outer:\n  inner:\n    speling: 1\n");
  absl::StatusOr<Map> outer = Map::Read(reader, nested, "", {"outer"});
  ASSERT_THAT(outer, IsOk());
  absl::StatusOr<Map> inner = Map::Read(reader, *outer->Find("outer"), {"inner"});
  ASSERT_THAT(inner, IsOk());
  EXPECT_THAT(Map::Read(reader, *inner->Find("inner"), {"spelling"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:3:5: outer.inner.speling: unknown key 'speling' (allowed: "
                       "spelling)"));
}

TEST(CommonStrictYamlTest, RepeatedKeyIsRefusedAtItsSecondPlace) {
  const Reader reader("t.yaml");
  EXPECT_THAT(Map::Read(reader, Load("name: a\ncount: 1\nname: b\n"), "", kTopKeys),
              StatusIs(absl::StatusCode::kInvalidArgument, "t.yaml:3:1: name: duplicate key"));
  // Keys the author names (labels) are checked for repeats too.
  EXPECT_THAT(Map::ReadAnyKeys(reader, Load("labels: {a: 1, a: 2}\n")["labels"], "labels"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("labels.a: duplicate key")));
}

TEST(CommonStrictYamlTest, WrongKindsAreNamed) {
  EXPECT_THAT(ReadTop("name: [a]\n", "name", ReadString),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:1:7: name: expected a string, got a list"));
  EXPECT_THAT(ReadTop("enabled: yes\n", "enabled", ReadBool),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:1:10: enabled: expected true or false, got 'yes'"));
  EXPECT_THAT(ReadTop("ratio: inf\n", "ratio", ReadDouble),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:1:8: ratio: expected a finite number, got 'inf'"));
  EXPECT_THAT(ReadTop("count: {a: 1}\n", "count", ReadUint32),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:1:8: count: expected a non-negative integer, got a mapping"));
  EXPECT_THAT(ReadTop("timeout: soon\n", "timeout", ReadPositiveDuration),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:1:10: timeout: 'soon' is not a number of seconds or a duration "
                       "like 500ms"));
  EXPECT_THAT(ReadTop("tags: [a, [b]]\n", "tags", ReadStringList),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:1:11: tags[1]: expected a string, got a list"));
  EXPECT_THAT(ReadTop("name: ''\n", "name", ReadNonEmptyString),
              StatusIs(absl::StatusCode::kInvalidArgument, "t.yaml:1:7: name: must not be empty"));
  const Reader reader("t.yaml");
  EXPECT_THAT(Map::Read(reader, Load("- a\n"), "", {"name", "count"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:1:1: expected a mapping, got a list (keys: name, count)"));
  EXPECT_THAT(Map::Read(reader, Load("{[a]: 1}\n"), "top", {"name"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:1:2: top: keys must be plain names"));
}

TEST(CommonStrictYamlTest, OutOfRangeNumbersAreRefused) {
  const auto in_range = [](const Reader& reader, const Entry& entry) {
    return ReadInt64(reader, entry, -3, 100);
  };
  EXPECT_THAT(ReadTop("count: 101\n", "count", in_range),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:1:8: count: expected an integer from -3 to 100, got '101'"));
  EXPECT_THAT(ReadTop("count: -4\n", "count", in_range),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("got '-4'")));
  EXPECT_THAT(ReadTop("count: -3\n", "count", in_range), IsOk());
  EXPECT_THAT(ReadTop("count: 4294967296\n", "count", ReadUint32),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected a non-negative integer, got '4294967296'")));
  EXPECT_THAT(ReadTop("count: -1\n", "count", ReadUint32),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("got '-1'")));
  EXPECT_THAT(ReadTop("timeout: 0\n", "timeout", ReadPositiveDuration),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:1:10: timeout: must be positive and finite, got '0'"));
  EXPECT_THAT(ReadTop("timeout: -1s\n", "timeout", ReadPositiveDuration),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be positive")));
  EXPECT_THAT(ReadTop("timeout: inf\n", "timeout", ReadPositiveDuration),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be positive")));
  EXPECT_THAT(ReadTop("timeout: 1.5\n", "timeout", ReadPositiveDuration), IsOk());
}

TEST(CommonStrictYamlTest, MissingValuesPointAtTheirKeyAndMissingKeysAtTheMapping) {
  // `count:` with nothing after it has no position of its own.
  EXPECT_THAT(ReadTop("name: a\ncount:\n", "count", ReadUint32),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:2:1: count: expected a non-negative integer, got nothing"));
  const Reader reader("t.yaml");
  absl::StatusOr<Map> map = Map::Read(reader, Load("# header\n\nname: a\n"), "", kTopKeys);
  ASSERT_THAT(map, IsOk());
  EXPECT_THAT(map->Require("count"),
              StatusIs(absl::StatusCode::kInvalidArgument, "t.yaml:3:1: count: is required"));
  EXPECT_THAT(map->Require("count", "required (how many)"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.yaml:3:1: count: required (how many)"));
  EXPECT_THAT(reader.FaultAt(YAML::Mark::null_mark(), "document", "is empty"),
              StatusIs(absl::StatusCode::kInvalidArgument, "t.yaml: document: is empty"));
}

TEST(CommonStrictYamlTest, TheDocumentsOwnTextCannotForgeALine) {
  const Reader reader("t.yaml");
  EXPECT_THAT(Map::Read(reader, Load("\"a\\nERROR forged\": 1\n"), "", {"name"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("t.yaml:1:1: a\\x0aERROR forged: unknown key")));
}

TEST(CommonStrictYamlTest, AliasesReadAsWhatTheyRepeatWithinTheLoadersBounds) {
  const Reader reader("t.yaml");
  absl::StatusOr<Map> map =
      Map::Read(reader, Load("name: &n demo\ntags: [*n, *n]\n"), "", kTopKeys);
  ASSERT_THAT(map, IsOk());
  EXPECT_THAT(*ReadStringList(reader, *map->Find("tags")), ElementsAre("demo", "demo"));

  // What the reader is handed is bounded before it walks it: an alias bomb
  // and a document nested past the depth limit never reach it.
  Limits limits;
  limits.max_bytes = 4096;
  limits.max_nodes = 1000;
  // Ten of each level: 10,000 nodes once expanded, in a few hundred bytes.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (const char* level : {"b", "c", "d"}) {
    const std::string below(1, static_cast<char>(level[0] - 1));
    std::vector<std::string> aliases(10, absl::StrCat("*", below));
    absl::StrAppend(&bomb, level, ": &", level, " [", absl::StrJoin(aliases, ", "), "]\n");
  }
  EXPECT_THAT(LoadBounded(bomb, "t.yaml", limits),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nodes once aliases are expanded")));
  limits.max_depth = 4;
  EXPECT_THAT(LoadBounded("a: {b: {c: {d: {e: 1}}}}\n", "t.yaml", limits),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nested more than 4 mappings and lists deep")));
}

}  // namespace
}  // namespace weightpath::yaml
