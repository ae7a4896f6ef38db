#include "base/json.h"

#include <gtest/gtest.h>

#include <string>

namespace fathom {
namespace {

TEST(JsonTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonEscape("plain"), "plain");
  EXPECT_EQ(JsonEscape("a\"b\\c"), "a\\\"b\\\\c");
  EXPECT_EQ(JsonEscape("line\nnext\r\ttab"), "line\\nnext\\r\\ttab");
  EXPECT_EQ(JsonEscape(std::string("nul\0bell\x07", 9)), "nul\\u0000bell\\u0007");
  EXPECT_EQ(JsonEscape("\x1f"), "\\u001f");
}

TEST(JsonTest, PassesUtf8ThroughAndQuotesWholeStrings) {
  EXPECT_EQ(JsonEscape("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(JsonString(""), "\"\"");
  EXPECT_EQ(JsonString("rank 0 -> \"1\""), "\"rank 0 -> \\\"1\\\"\"");
}

}  // namespace
}  // namespace fathom
