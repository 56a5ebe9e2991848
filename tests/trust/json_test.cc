// Canonical JSON against securesystemslib, and the strict parser.
#include "trust/json.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "trust/crypto.h"
#include "trust/metadata.h"

namespace weightpath::trust {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

struct CanonicalVector {
  const char* input;     // ordinary JSON
  const char* expected;  // what securesystemslib 0.26 encode_canonical returns
};

// Each expected value was produced by Debian 12's python3-securesystemslib
// (0.26.0) as encode_canonical(json.loads(input)).
const CanonicalVector kVectors[] = {
    {R"({"b": 1, "a": [true, false, null], "c": {"z": "x", "y": -5}})",
     R"({"a":[true,false,null],"b":1,"c":{"y":-5,"z":"x"}})"},
    {"{}", "{}"},
    {"[]", "[]"},
    {"[[], {}, [{}]]", "[[],{},[{}]]"},
    // Only '"' and '\' are escaped; newline, tab, U+0001 and non-ASCII go
    // out as raw bytes.
    {R"("a\"b\\c\nd\te\u0001f\u00e9\u20ac\ud83d\ude00\/")",
     "\"a\\\"b\\\\c\nd\te\x01" "f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80/\""},
    // Keys in code point order: "" < "A" < "a" < "z" < U+007F < U+00E9 < U+1F600.
    {R"({"\u00e9": 1, "z": 2, "a": 3, "\ud83d\ude00": 4, "A": 5, "": 6, "\u007f": 7})",
     "{\"\":6,\"A\":5,\"a\":3,\"z\":2,\"\x7f\":7,\"\xc3\xa9\":1,\"\xf0\x9f\x98\x80\":4}"},
    {"[9223372036854775807, -9223372036854775808, 0, -1, 42, -0]",
     "[9223372036854775807,-9223372036854775808,0,-1,42,0]"},
    {R"({"keytype": "ed25519", "scheme": "ed25519", "keyval": {"public": "edcd0a32a07dce33f7c7873aaffbff36d20ea30787574ead335eefd337e4dacd"}})",
     R"({"keytype":"ed25519","keyval":{"public":"edcd0a32a07dce33f7c7873aaffbff36d20ea30787574ead335eefd337e4dacd"},"scheme":"ed25519"})"},
};

TEST(TrustCanonicalJsonTest, MatchesSecuresystemslib) {
  for (const CanonicalVector& vector : kVectors) {
    absl::StatusOr<Json> parsed = ParseJson(vector.input, "vector");
    ASSERT_THAT(parsed, IsOk()) << vector.input;
    EXPECT_EQ(CanonicalJson(*parsed), vector.expected) << vector.input;
  }
}

TEST(TrustCanonicalJsonTest, KeyIdIsSha256OfTheCanonicalKey) {
  absl::StatusOr<Json> key = ParseJson(kVectors[7].input, "key");
  ASSERT_THAT(key, IsOk());
  // hashlib.sha256(encode_canonical(key).encode()).hexdigest()
  EXPECT_EQ(ComputeKeyId(*key), "2345a90ad8d76f3677f9ad6695b0ba0b5c7b7fbf27fb0ed35fbdf7b71264a679");
}

TEST(TrustCanonicalJsonTest, PrettyFormParsesBackToTheSameCanonicalBytes) {
  for (const CanonicalVector& vector : kVectors) {
    absl::StatusOr<Json> parsed = ParseJson(vector.input, "vector");
    ASSERT_THAT(parsed, IsOk());
    absl::StatusOr<Json> again = ParseJson(PrettyJson(*parsed), "pretty");
    ASSERT_THAT(again, IsOk()) << PrettyJson(*parsed);
    EXPECT_EQ(*again, *parsed);
    EXPECT_EQ(CanonicalJson(*again), vector.expected);
  }
}

TEST(TrustJsonParserTest, RefusesWhatTwoReadersCouldReadDifferently) {
  struct Case {
    std::string text;
    std::string reason;
  };
  const Case cases[] = {
      {R"({"version": 1, "version": 2})", "duplicate key \"version\""},
      {"1.0", "fraction or exponent"},
      {"1e3", "fraction or exponent"},
      {"01", "leading zero"},
      {"9223372036854775808", "64-bit range"},
      {"-9223372036854775809", "64-bit range"},
      {"\"\xff\"", "invalid UTF-8"},
      {"\"\xc0\xaf\"", "invalid UTF-8"},              // overlong '/'
      {"\"\xed\xa0\x80\"", "invalid UTF-8"},          // encoded surrogate
      {R"("\ud800")", "high surrogate"},
      {R"("\udc00")", "lone low surrogate"},
      {"\"a\nb\"", "control character"},
      {"{} {}", "unexpected text after"},
      {"\xef\xbb\xbf{}", "expected a JSON value"},    // byte order mark
      {"[1,]", "expected a JSON value"},
      {"{'a': 1}", "expected a string key"},
      {"\"\\x\"", "unknown escape"},
      {"", "unexpected end"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseJson(c.text, "doc.json"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.reason)))
        << c.text;
  }
}

TEST(TrustJsonParserTest, ErrorsNameTheFileAndTheByte) {
  EXPECT_THAT(ParseJson(R"({"a": 1, "a": 2})", "timestamp.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("timestamp.json: byte 9: duplicate key \"a\"")));
}

TEST(TrustJsonParserTest, BoundsNesting) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  EXPECT_THAT(ParseJson(deep, "deep.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested deeper than 64")));
  const std::string fine = std::string(64, '[') + std::string(64, ']');
  EXPECT_THAT(ParseJson(fine, "fine.json"), IsOk());
}

TEST(TrustJsonParserTest, PrettyEscapesControlCharacters) {
  Json value = Json::String(std::string("a\x01\n\"", 4));
  EXPECT_EQ(PrettyJson(value), "\"a\\u0001\\n\\\"\"\n");
}

}  // namespace
}  // namespace weightpath::trust
