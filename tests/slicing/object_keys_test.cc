// Object keys (slicing/object_keys.h): the text prism_torch writes, read
// back, and moved to a role's captured rank.
#include "slicing/object_keys.h"

#include <gtest/gtest.h>

namespace prism {
namespace {

// pp 2 x dp 32, as examples/jobs/torch-pipelining-64.yaml lays ranks out.
Layout pp2_dp32() {
  return Layout(64, {{"tp", 1}, {"cp", 1}, {"dp", 32}, {"pp", 2}}, 8);
}

TEST(ObjectKeys, ReadBackAsWritten) {
  for (const char* text :
       {"prism/object/1/to/33/0", "prism/object/0/group/0:1:64/2", "prism/object/3/group/3:8:4/0",
        "prism/object/5/group/5:1:1/7", "prism/object/2/group/0,5,2/1",
        "prism/object/4/all_gather/0:1:8/3", "prism/object/4/gather/4,0/0"}) {
    const std::optional<ObjectKey> k = parse_object_key(text);
    ASSERT_TRUE(k.has_value()) << text;
    EXPECT_EQ(format_object_key(*k), text);
  }
  const ObjectKey k = *parse_object_key("prism/object/3/group/3:8:4/0");
  EXPECT_EQ(k.src, 3);
  EXPECT_EQ(k.dst, kNone);
  EXPECT_EQ(k.group, (std::vector<Rank>{3, 11, 19, 27}));
  EXPECT_EQ(describe_object_key(*parse_object_key("prism/object/1/to/33/1")),
            "the 2nd send_object_list from rank 1 to rank 33");
  EXPECT_EQ(describe_object_key(k), "the 1st broadcast_object_list from rank 3 over ranks 3:8:4");
  const ObjectKey g = *parse_object_key("prism/object/4/all_gather/0:1:8/3");
  EXPECT_EQ(g.call, ObjectCall::kAllGather);
  EXPECT_TRUE(is_gather(g.call));
  EXPECT_FALSE(is_gather(k.call));
  EXPECT_EQ(describe_object_key(g),
            "rank 4's object in its 4th all_gather_object over ranks 0:1:8");
  EXPECT_EQ(describe_object_key(*parse_object_key("prism/object/4/gather/4,0/0")),
            "rank 4's object in its 1st gather_object over ranks 4,0");
}

TEST(ObjectKeys, OtherTextIsNotAKey) {
  for (const char* text :
       {"prism/group/1", "prism/object/1/to/33", "prism/object/x/to/33/0", "prism/object/1/at/3/0",
        "prism/object/1/to/-3/0", "prism/object/1/group/0:1/0", "prism/object/1/group/0:1:0/0",
        "prism/object/1/group/0,,2/0", "prism/object/1/to/33/0/extra",
        "prism/object/1/allgather/0:1:4/0", "prism/object/1/gather//0",
        "prism/object/99999999999/to/1/0"}) {
    EXPECT_FALSE(parse_object_key(text).has_value()) << text;
  }
}

TEST(ObjectKeys, MoveToTheCapturedRankOfTheSendersRole) {
  const Layout l = pp2_dp32();
  // Rank 1 (stage 0, dp 1) sends to rank 33 what rank 0 sent to rank 32.
  EXPECT_EQ(format_object_key(move_object_key(l, *parse_object_key("prism/object/1/to/33/0"), 0)),
            "prism/object/0/to/32/0");
  // Rank 32 sends to rank 0 (the wrap of the interleaved schedule) what rank
  // 33 sent to rank 1.
  EXPECT_EQ(format_object_key(move_object_key(l, *parse_object_key("prism/object/32/to/0/1"), 33)),
            "prism/object/33/to/1/1");
  // A broadcast over the world moves to itself; over stage 1's dp group, to
  // the captured rank's.
  EXPECT_EQ(
      format_object_key(move_object_key(l, *parse_object_key("prism/object/2/group/0:1:64/0"), 0)),
      "prism/object/0/group/0:1:64/0");
  EXPECT_EQ(format_object_key(
                move_object_key(l, *parse_object_key("prism/object/40/group/32:1:32/0"), 33)),
            "prism/object/33/group/32:1:32/0");
  EXPECT_EQ(format_object_key(
                move_object_key(l, *parse_object_key("prism/object/40/group/8:32:2/0"), 33)),
            "prism/object/33/group/1:32:2/0");
  // Rank 40's object in an all_gather_object over stage 1's dp group is
  // what rank 33 gathered as its own over the same group; over the world,
  // likewise.
  EXPECT_EQ(format_object_key(
                move_object_key(l, *parse_object_key("prism/object/40/all_gather/32:1:32/2"), 33)),
            "prism/object/33/all_gather/32:1:32/2");
  EXPECT_EQ(
      format_object_key(move_object_key(l, *parse_object_key("prism/object/5/gather/0:1:64/0"), 0)),
      "prism/object/0/gather/0:1:64/0");
}

}  // namespace
}  // namespace prism
