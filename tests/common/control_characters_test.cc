#include "common/control_characters.h"

#include <string>

#include "gtest/gtest.h"

namespace weightpath {
namespace {

TEST(CommonControlCharactersTest, EscapesC0AndDel) {
  EXPECT_EQ(ControlEscaped("a\nb\rc\td"), "a\\x0ab\\x0dc\\x09d");
  EXPECT_EQ(ControlEscaped(std::string("\x00\x1f\x7f", 3)), "\\x00\\x1f\\x7f");
  // Printable ASCII, a backslash and UTF-8 pass through unchanged.
  EXPECT_EQ(ControlEscaped("x86_64 \\ caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "x86_64 \\ caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_FALSE(HasControlCharacters("plain text"));
  EXPECT_FALSE(HasControlCharacters("caf\xc3\xa9"));
  EXPECT_TRUE(HasControlCharacters("two\nlines"));
  EXPECT_TRUE(HasControlCharacters("del\x7f"));
}

// What a hostile readiness endpoint answered ("HTTP/1.1 2\xff\xfe OK"): bytes
// that are not UTF-8 would make the report's proto3 string unparseable.
TEST(CommonControlCharactersTest, InvalidUtf8BytesAreEscapedOneByOne) {
  EXPECT_EQ(ControlEscaped("HTTP/1.1 2\xff\xfe OK"), "HTTP/1.1 2\\xff\\xfe OK");
  EXPECT_TRUE(HasControlCharacters("2\xff"));
  // A stray continuation byte, a sequence cut short, an overlong '/', a
  // surrogate (U+D800) and a code point past U+10FFFF.
  EXPECT_EQ(ControlEscaped("\x80"), "\\x80");
  EXPECT_EQ(ControlEscaped("\xe2\x82"), "\\xe2\\x82");
  EXPECT_EQ(ControlEscaped("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(ControlEscaped("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(ControlEscaped("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  // A valid character right after an invalid byte is kept.
  EXPECT_EQ(ControlEscaped("\xff\xc3\xa9"), "\\xff\xc3\xa9");
}

// C1 controls drive a terminal as ESC does (U+009B is CSI, U+009D OSC); the
// bidi overrides and isolates reorder what an operator reads in a table.
TEST(CommonControlCharactersTest, C1ControlsSeparatorsAndBidiControlsAreEscaped) {
  EXPECT_EQ(ControlEscaped("a\xc2\x9b" "31mb"), "a\\u009b31mb");
  EXPECT_EQ(ControlEscaped("\xc2\x9d" "0;title\xc2\x9c"), "\\u009d0;title\\u009c");
  EXPECT_EQ(ControlEscaped("rollout-\xe2\x80\xae" "txt.exe"), "rollout-\\u202etxt.exe");
  EXPECT_EQ(ControlEscaped("one\xe2\x80\xa8two\xe2\x80\xa9"), "one\\u2028two\\u2029");
  EXPECT_EQ(ControlEscaped("\xe2\x81\xa6x\xe2\x81\xa9"), "\\u2066x\\u2069");
  EXPECT_TRUE(HasControlCharacters("\xe2\x80\xae"));
  EXPECT_TRUE(HasControlCharacters("\xc2\x85"));
  // U+00A0 (no-break space) and U+200B-U+2027 outside the ranges stay.
  EXPECT_EQ(ControlEscaped("\xc2\xa0\xe2\x80\x94"), "\xc2\xa0\xe2\x80\x94");
}

}  // namespace
}  // namespace weightpath
