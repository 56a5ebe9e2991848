#include "common/control_characters.h"

#include <string>

#include "gtest/gtest.h"

namespace weightpath {
namespace {

TEST(CommonControlCharactersTest, EscapesC0AndDelOnly) {
  EXPECT_EQ(ControlEscaped("a\nb\rc\td"), "a\\x0ab\\x0dc\\x09d");
  EXPECT_EQ(ControlEscaped(std::string("\x00\x1f\x7f", 3)), "\\x00\\x1f\\x7f");
  // Printable ASCII, a backslash and UTF-8 pass through unchanged.
  EXPECT_EQ(ControlEscaped("x86_64 \\ caf\xc3\xa9"), "x86_64 \\ caf\xc3\xa9");
  EXPECT_FALSE(HasControlCharacters("plain text"));
  EXPECT_TRUE(HasControlCharacters("two\nlines"));
  EXPECT_TRUE(HasControlCharacters("del\x7f"));
}

}  // namespace
}  // namespace weightpath
