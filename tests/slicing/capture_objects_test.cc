// A capture file's "objects" (slicing/capture_objects.h): base64 both ways,
// the objects a rank sent written and read back, and the reader's refusals.
#include "slicing/capture_objects.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace prism {
namespace {

using ::testing::HasSubstr;

std::vector<std::uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

TEST(CaptureObjectsTest, Base64AsRfc4648) {
  // RFC 4648's test vectors.
  const std::vector<std::pair<std::string, std::string>> vectors = {{"", ""},
                                                                    {"f", "Zg=="},
                                                                    {"fo", "Zm8="},
                                                                    {"foo", "Zm9v"},
                                                                    {"foob", "Zm9vYg=="},
                                                                    {"fooba", "Zm9vYmE="},
                                                                    {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(capture_objects::base64(bytes(plain)), encoded);
    EXPECT_EQ(capture_objects::from_base64(encoded), bytes(plain)) << encoded;
  }
  std::vector<std::uint8_t> all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<std::uint8_t>(b));
  EXPECT_EQ(capture_objects::from_base64(capture_objects::base64(all)), all);
  for (const char* bad : {"Zg=", "Zg=a", "Z===", "====", "Zh==", "Zm9v!A==", "=m9v"})
    EXPECT_FALSE(capture_objects::from_base64(bad).has_value()) << bad;
}

TEST(CaptureObjectsTest, ACaptureFileHoldsTheObjectsItsRankSent) {
  RankCapture c;
  c.rank = 0;
  c.world_size = 64;
  c.entries = {{wire::Bye{0, 1000}}};
  const std::string plain = format_capture_json(c);
  EXPECT_EQ(plain.find("objects"), std::string::npos);  // none: the file as before
  c.objects = {{"prism/object/0/group/0:1:64/0", bytes("config\x80\x01")},
               {"prism/object/0/to/32/0", bytes("")}};
  const std::string text = format_capture_json(c);
  EXPECT_THAT(text, HasSubstr("\"objects\":[\n{\"base64\":\"Y29uZmlngAE=\",\"key\":\"prism/object/"
                              "0/group/0:1:64/0\"},\n"));
  Result<RankCapture> back = parse_capture_json(text, "cap");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  ASSERT_EQ(back.value().objects.size(), 2u);
  EXPECT_EQ(back.value().objects[0].key, "prism/object/0/group/0:1:64/0");
  EXPECT_EQ(back.value().objects[0].bytes, c.objects[0].bytes);
  EXPECT_TRUE(back.value().objects[1].bytes.empty());
}

TEST(CaptureObjectsTest, RefusesObjectsItCannotRead) {
  const std::string head =
      R"({"format":"prism-capture","version":1,"rank":0,"world_size":4,"events":[],"objects":)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{}", "cap: \"objects\" is not a list"},
      {"[3]", "cap: object 0: no \"key\" string"},
      {R"([{"key":"prism/group/1","base64":""}])",
       "cap: object 0: \"prism/group/1\" is not an object key"},
      {R"([{"key":"prism/object/0/to/1/0"}])", "cap: object 0: no \"base64\" string"},
      {R"([{"key":"prism/object/0/to/1/0","base64":"Zg="}])",
       "cap: object 0: \"base64\" is not base64"},
  };
  for (const auto& [objects, error] : cases) {
    Result<RankCapture> r = parse_capture_json(head + objects + "}", "cap");
    ASSERT_FALSE(r.is_ok()) << objects;
    EXPECT_THAT(r.status().message(), HasSubstr(error)) << objects;
  }
}

}  // namespace
}  // namespace prism
