// ObjectPayloads (runtime/object_payloads.h): what the captures recorded,
// answered for the virtual ranks of their roles, and each way an object
// cannot be known.
#include "runtime/object_payloads.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace prism::runtime {
namespace {

using ::testing::HasSubstr;
using State = ObjectAnswer::State;

// pp 2 x dp 32: stage0 captured as rank 0, stage1 as rank 33.
ObjectRoles pipeline_roles() {
  ObjectRoles r;
  r.layout = Layout(64, {{"tp", 1}, {"cp", 1}, {"dp", 32}, {"pp", 2}}, 8);
  r.names = {"stage0", "stage1"};
  for (Rank k = 0; k < 64; ++k) r.role_of_rank.push_back(k < 32 ? 0 : 1);
  r.captured = {0, 33};
  return r;
}

std::vector<std::uint8_t> bytes(std::string_view s) {
  return {s.begin(), s.end()};
}

TEST(ObjectPayloads, AVirtualRankSendsWhatItsRolesCaptureRecorded) {
  const ObjectRoles roles = pipeline_roles();
  ObjectPayloads p;
  p.started(0);
  p.record("prism/object/0/to/32/0", bytes("meta of stage 0's output"));
  p.record("prism/object/0/group/0:1:64/0", bytes("config"));
  p.finished(0);
  EXPECT_EQ(p.size(), 2u);
  for (const char* key :
       {"prism/object/1/to/33/0", "prism/object/0/to/32/0", "prism/object/31/to/63/0"}) {
    const ObjectAnswer a = p.answer(key, roles);
    ASSERT_EQ(a.state, State::kReady) << key << ": " << a.error;
    EXPECT_EQ(a.bytes, bytes("meta of stage 0's output")) << key;
  }
  const ObjectAnswer config = p.answer("prism/object/0/group/0:1:64/0", roles);
  ASSERT_EQ(config.state, State::kReady) << config.error;
  EXPECT_EQ(config.bytes, bytes("config"));
  // What rank 0's capture file holds, by key; rank 33 sent nothing.
  const std::vector<CapturedObject> sent = p.sent_by(0);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].key, "prism/object/0/group/0:1:64/0");
  EXPECT_EQ(sent[1].key, "prism/object/0/to/32/0");
  EXPECT_TRUE(p.sent_by(33).empty());
}

TEST(ObjectPayloads, AnObjectTheCaptureDidNotRecordIsOneClearError) {
  const ObjectRoles roles = pipeline_roles();
  ObjectPayloads p;
  p.started(0);
  p.record("prism/object/0/to/32/0", bytes("x"));
  p.finished(0);
  const ObjectAnswer a = p.answer("prism/object/1/to/33/1", roles);
  ASSERT_EQ(a.state, State::kFailed);
  EXPECT_EQ(a.error,
            "the 2nd send_object_list from rank 1 to rank 33: rank 1 is virtual and sends what "
            "rank 0, the captured rank of its role stage0, sent, "
            "and the capture of rank 0 (role stage0) recorded no 2nd send_object_list from rank 0 "
            "to rank 32: the program did not make that call there (the ranks of a role diverged, "
            "or the receiver asks for more objects than the sender sent). Make every rank of a "
            "role send the same objects in the same order, or make rank 1 real (--real-ranks) so "
            "that it sends its own");
  const ObjectAnswer b = p.answer("prism/object/0/group/0:1:64/0", roles);
  ASSERT_EQ(b.state, State::kFailed);
  EXPECT_THAT(
      b.error,
      HasSubstr(
          "over ranks 0:1:64: rank 0 is virtual here and sends what its capture sent, and the "
          "capture of rank 0 (role stage0) recorded no 1st "
          "broadcast_object_list from rank 0 over ranks 0:1:64"));
}

TEST(ObjectPayloads, WhileTheSendersCaptureRunsTheAnswerWaits) {
  const ObjectRoles roles = pipeline_roles();
  ObjectPayloads p;
  p.started(33);
  EXPECT_EQ(p.answer("prism/object/32/to/0/0", roles).state, State::kPending);
  p.record("prism/object/33/to/1/0", bytes("y"));
  EXPECT_EQ(p.answer("prism/object/32/to/0/0", roles).state, State::kReady);
  // Not started, and captured after the receiver: never a wait.
  const ObjectAnswer later = p.answer("prism/object/1/to/33/0", roles);
  ASSERT_EQ(later.state, State::kFailed);
  EXPECT_THAT(later.error, HasSubstr("but the capture of rank 0 runs after this one, so the 1st "
                                     "send_object_list from rank 0 to rank 32 is not known yet: "
                                     "capture the roles side by side (--capture-jobs 2 or more)"));
}

TEST(ObjectPayloads, NoCaptureNoObject) {
  ObjectRoles roles = pipeline_roles();
  roles.captured[0] = kNone;
  ObjectPayloads p;
  const ObjectAnswer a = p.answer("prism/object/4/to/36/0", roles);
  ASSERT_EQ(a.state, State::kFailed);
  EXPECT_THAT(a.error, HasSubstr("rank 4 is virtual and its role stage0 was not captured"));
  roles.unknown = "the graph comes from --graph g.json, which holds no objects";
  const ObjectAnswer b = p.answer("prism/object/4/to/36/0", roles);
  ASSERT_EQ(b.state, State::kFailed);
  EXPECT_EQ(b.error,
            "the 1st send_object_list from rank 4 to rank 36: rank 4 is virtual and its object is "
            "not known: the graph comes from --graph g.json, which holds no objects");
  const ObjectAnswer c = p.answer("prism/object/70/to/3/0", pipeline_roles());
  ASSERT_EQ(c.state, State::kFailed);
  EXPECT_THAT(c.error, HasSubstr("rank 70 is not a rank of the job"));
}

// all_gather_object and gather_object: each rank's object is its role's
// captured rank's own; one that cannot be known yet (its role captured
// later, no capture, a graph without objects) is kUnknown, for the gatherer
// to keep its own in that slot; one the finished capture lacks is an error.
TEST(ObjectPayloads, GatheredObjectsNotKnownYetAreUnknownNotFailed) {
  ObjectRoles roles = pipeline_roles();
  ObjectPayloads p;
  p.started(0);
  p.record("prism/object/0/all_gather/0:1:64/0", bytes("stage0"));
  p.finished(0);
  const ObjectAnswer a = p.answer("prism/object/5/all_gather/0:1:64/0", roles);
  ASSERT_EQ(a.state, State::kReady) << a.error;
  EXPECT_EQ(a.bytes, bytes("stage0"));
  const ObjectAnswer later = p.answer("prism/object/40/all_gather/0:1:64/0", roles);
  ASSERT_EQ(later.state, State::kUnknown);
  EXPECT_EQ(later.error,
            "rank 40's object in its 1st all_gather_object over ranks 0:1:64: rank 40 is virtual "
            "and sends what rank 33, the captured rank of its role stage1, sent, but the capture "
            "of rank 33 runs after this one, so rank 33's object in its 1st all_gather_object "
            "over ranks 0:1:64 is not known yet: capture the roles side by side (--capture-jobs "
            "2 or more), so that the receiver gets each object as the sender's capture sends it");
  p.started(33);
  p.record("prism/object/33/all_gather/0:1:64/0", bytes("stage1"));
  p.finished(33);
  const ObjectAnswer b = p.answer("prism/object/40/all_gather/0:1:64/0", roles);
  ASSERT_EQ(b.state, State::kReady) << b.error;
  EXPECT_EQ(b.bytes, bytes("stage1"));
  const ObjectAnswer missing = p.answer("prism/object/5/gather/0:1:64/0", roles);
  ASSERT_EQ(missing.state, State::kFailed);
  EXPECT_THAT(missing.error,
              HasSubstr("and the capture of rank 0 (role stage0) recorded no 1st gather_object "
                        "over ranks 0:1:64 with rank 0's object: the program did not make that "
                        "call there"));
  roles.captured[1] = kNone;
  const ObjectAnswer none = p.answer("prism/object/40/all_gather/0:1:64/0", roles);
  ASSERT_EQ(none.state, State::kUnknown);
  EXPECT_THAT(none.error, HasSubstr("its role stage1 was not captured"));
  roles.unknown = "the graph comes from --graph g.json, which holds no objects";
  EXPECT_EQ(p.answer("prism/object/5/all_gather/0:1:64/0", roles).state, State::kUnknown);
  EXPECT_EQ(p.answer("prism/object/5/to/37/0", roles).state, State::kFailed);
}

}  // namespace
}  // namespace prism::runtime
