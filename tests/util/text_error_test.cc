#include "util/text_error.h"

#include <string>

#include <gtest/gtest.h>

namespace prism {
namespace {

TEST(TextErrorTest, FirstBadTextByte) {
  EXPECT_EQ(first_bad_text_byte(""), std::nullopt);
  EXPECT_EQ(first_bad_text_byte("plain ascii 123"), std::nullopt);
  EXPECT_EQ(first_bad_text_byte("gr\xc3\xbc\xc3\x9f"), std::nullopt);         // 2 bytes
  EXPECT_EQ(first_bad_text_byte("\xe2\x82\xac euro"), std::nullopt);          // 3 bytes
  EXPECT_EQ(first_bad_text_byte("\xf0\x9f\x98\x80"), std::nullopt);           // 4 bytes
  EXPECT_EQ(first_bad_text_byte("ab\xff"), std::optional<std::size_t>(2));    // not a lead
  EXPECT_EQ(first_bad_text_byte("a\xc3"), std::optional<std::size_t>(1));     // cut short
  EXPECT_EQ(first_bad_text_byte("\xc3(x"), std::optional<std::size_t>(0));    // bad continuation
  EXPECT_EQ(first_bad_text_byte("\xc0\xaf"), std::optional<std::size_t>(0));  // overlong
  EXPECT_EQ(first_bad_text_byte("\xed\xa0\x80"), std::optional<std::size_t>(0));      // surrogate
  EXPECT_EQ(first_bad_text_byte("\xf4\x90\x80\x80"), std::optional<std::size_t>(0));  // > U+10FFFF
  EXPECT_EQ(first_bad_text_byte("a\tb"), std::optional<std::size_t>(1));              // control
  EXPECT_EQ(first_bad_text_byte("a\x7f"), std::optional<std::size_t>(1));             // DEL
}

// A JSON syntax error in PrismLLM's words, at its line and column; a
// message that is not nlohmann's syntax error is kept.
TEST(TextErrorTest, JsonSyntaxErrorsInOurWords) {
  const std::string syntax =
      "[json.exception.parse_error.101] parse error at line 2, column 3: syntax error while "
      "parsing value - invalid literal; last read: 'x'";
  EXPECT_EQ(json_syntax_error("{\n  x", "f.json", 4, syntax).message(),
            "f.json:2:2: malformed JSON: unexpected ' '");
  EXPECT_EQ(json_syntax_error("{\"a\": [1", "f.json", 9, syntax).message(),
            "f.json:1:9: malformed JSON: the text ends before the JSON value is complete");
  EXPECT_EQ(json_syntax_error("\"a\x01\"", "f.json", 3, syntax).message(),
            "f.json:1:3: malformed JSON: control byte 0x01 (escape it inside a string)");
  EXPECT_EQ(json_syntax_error("\"\xff\"", "f.json", 2, syntax).message(),
            "f.json:1:2: malformed JSON: ill-formed UTF-8 (byte 0xff)");
  EXPECT_EQ(json_syntax_error("{}", "f.json", 2,
                              "[json.exception.parse_error.101] parse error at byte 2: /a: "
                              "duplicate field \"x\"")
                .message(),
            "f.json:1:2: /a: duplicate field \"x\"");
  EXPECT_EQ(json_value_error("f.json", 406, "[json.exception.out_of_range.406] number overflow")
                .message(),
            "f.json: malformed JSON: a number outside the range of a double (such as 1e400)");
  EXPECT_EQ(json_value_error("f.json", 302, "[json.exception.type_error.302] type must be string")
                .message(),
            "f.json: malformed JSON: type must be string");
}

// The CLI's error line: one line, printable, bounded, whatever the message
// quotes (issue 26: an 8 MiB error line, control bytes printed raw).
TEST(TextErrorTest, PrintableLine) {
  EXPECT_EQ(printable_line("plain words, kept"), "plain words, kept");
  EXPECT_EQ(printable_line("two\nlines"), "two lines");
  EXPECT_EQ(printable_line("esc \x1b[31m and \xff"), "esc \\x1b[31m and \\xff");
  EXPECT_EQ(printable_line("gr\xc3\xbc\xc3\x9f"), "gr\xc3\xbc\xc3\x9f");
  const std::string huge(1'000'000, 'k');
  const std::string line = printable_line("key '" + huge + "' unknown");
  EXPECT_EQ(line, "key '" + std::string(39, 'k') + "...(999922 bytes)..." + std::string(39, 'k') +
                      "' unknown");
  // Many long words: the line stops at max_line and says how much is left.
  std::string many;
  for (int i = 0; i < 100; ++i) many += std::string(150, 'a') + " ";
  const std::string cut = printable_line(many, 200, 1000);
  EXPECT_EQ(cut.size(), 1000u + std::string("... (14100 bytes more)").size());
  EXPECT_TRUE(cut.ends_with("... (14100 bytes more)")) << cut.substr(cut.size() - 40);
}

}  // namespace
}  // namespace prism
