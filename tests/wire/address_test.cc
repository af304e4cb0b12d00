#include "wire/address.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace prism::wire {
namespace {

using ::testing::HasSubstr;

TEST(AddressTest, ParsesUnixAndTcp) {
  Result<Address> u = parse_address("unix:/tmp/prism/coord.sock");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(u.value().kind, Address::Kind::kUnix);
  EXPECT_EQ(u.value().path, "/tmp/prism/coord.sock");
  EXPECT_EQ(u.value().to_string(), "unix:/tmp/prism/coord.sock");

  Result<Address> t = parse_address("tcp:10.0.0.7:29400");
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t.value().host, "10.0.0.7");
  EXPECT_EQ(t.value().port, 29400);
  EXPECT_EQ(t.value().to_string(), "tcp:10.0.0.7:29400");

  Result<Address> v6 = parse_address("tcp:[::1]:0");
  ASSERT_TRUE(v6.is_ok());
  EXPECT_EQ(v6.value().host, "::1");
  EXPECT_EQ(v6.value().port, 0);
  EXPECT_EQ(v6.value().to_string(), "tcp:[::1]:0");
}

TEST(AddressTest, RejectsWhatIsNotAnAddress) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"http://x", "unknown scheme"},
      {"unix:", "empty socket path"},
      {"unix:/" + std::string(200, 'a'), "socket path of 201 bytes, over 107"},
      {"tcp:host", "no :PORT"},
      {"tcp::80", "empty host"},
      {"tcp:host:http", "port 'http' is not a number in 0..65535"},
      {"tcp:host:65536", "port '65536' is not a number"},
      {"tcp:host:", "port '' is not a number"},
      {"tcp:::1:80", "an IPv6 host goes in brackets"},
      {"tcp:[::1", "'[' without ']'"},
      {"tcp:[::1]80", "no :PORT after the host"},
  };
  for (const auto& [text, why] : cases) {
    Result<Address> a = parse_address(text);
    ASSERT_FALSE(a.is_ok()) << text;
    EXPECT_THAT(a.status().message(), HasSubstr(why)) << text;
    EXPECT_THAT(a.status().message(), HasSubstr("'" + text + "'")) << text;
  }
}

TEST(AddressTest, Loopback) {
  EXPECT_TRUE(is_loopback(parse_address("unix:/x").value()));
  EXPECT_TRUE(is_loopback(parse_address("tcp:127.0.0.1:1").value()));
  EXPECT_TRUE(is_loopback(parse_address("tcp:localhost:1").value()));
  EXPECT_TRUE(is_loopback(parse_address("tcp:[::1]:1").value()));
  EXPECT_FALSE(is_loopback(parse_address("tcp:0.0.0.0:1").value()));
  EXPECT_FALSE(is_loopback(parse_address("tcp:10.1.2.3:1").value()));
}

}  // namespace
}  // namespace prism::wire
