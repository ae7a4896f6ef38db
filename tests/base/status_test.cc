#include "base/status.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

StatusOr<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgument("ParsePositive: value=" + std::to_string(v) + " is not > 0");
  return v;
}

Status UsesMacros(int v, int* out) {
  FATHOM_ASSIGN_OR_RETURN(int x, ParsePositive(v));
  *out = x * 2;
  return Status::Ok();
}

TEST(StatusTest, OkIsCheapAndEmpty) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(s.message().empty());
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = InvalidArgument("bad mtu=9001");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: bad mtu=9001");
  EXPECT_EQ(s.WithContext("Load(a.yaml)").message(), "Load(a.yaml): bad mtu=9001");
  EXPECT_TRUE(Status().WithContext("x").ok());
}

TEST(StatusTest, StatusOrAndMacros) {
  int out = 0;
  EXPECT_TRUE(UsesMacros(21, &out).ok());
  EXPECT_EQ(out, 42);
  Status s = UsesMacros(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("value=-1"), std::string::npos);
  StatusOr<std::string> so = std::string("abc");
  ASSERT_TRUE(so.ok());
  EXPECT_EQ(so->size(), 3u);
}

// The one Hex() every layer's messages use (verbs' "qpn=0x11" form).
TEST(StatusTest, HexPrintsTheVerbsForm) {
  EXPECT_EQ(Hex(0x11), "0x11");
  EXPECT_EQ(Hex(0), "0x0");
  EXPECT_EQ(Hex(0xffffffffffffffffULL), "0xffffffffffffffff");
  EXPECT_EQ(Hex(0x1f, 6), "0x00001f");
}

}  // namespace
}  // namespace fathom
