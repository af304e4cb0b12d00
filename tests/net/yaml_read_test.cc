// yaml::problem(): yaml-cpp's parse errors in our words, never the
// library's text (issue 26, "errors in our words").
#include "net/yaml_read.h"

#include <gtest/gtest.h>

#include <string>

namespace prism::yaml {
namespace {

std::string problem_of(const std::string& text) {
  try {
    YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return problem(e);
  }
  return "(parsed)";
}

TEST(YamlProblem, SaysWhatIsWrongInOurWords) {
  EXPECT_EQ(problem_of("a: [1, 2\n"), "a '[' list is not closed with ']'");
  EXPECT_EQ(problem_of("a: {b: 1\n"), "a '{' mapping is not closed with '}'");
  EXPECT_EQ(problem_of("a: b: c\n"),
            "a ':' where no value can start (a 'key: value' inside a value: quote it or put it "
            "on its own line)");
  EXPECT_EQ(problem_of("a: \"x\\q\"\n"), "an unknown escape in a double-quoted value: \\q");
  EXPECT_EQ(problem_of("a: *nothing\n"), "an alias whose '&' anchor is not defined before it");
}

// A message the table does not know is still not the library's text.
TEST(YamlProblem, AnUnknownMessageIsNotPassedOn) {
  const YAML::Exception e(YAML::Mark::null_mark(), "some future yaml-cpp wording");
  EXPECT_EQ(problem(e), "not valid YAML here");
}

}  // namespace
}  // namespace prism::yaml
