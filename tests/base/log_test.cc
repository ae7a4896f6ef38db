// The diagnostic log's levels (base/log.h): names, -v counts, the
// environment variable, and what each level lets through.
#include "base/log.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace fathom::log {
namespace {

TEST(LogTest, ParsesEveryLevelNameInAnyCase) {
  EXPECT_EQ(*ParseLevel("trace"), Level::kTrace);
  EXPECT_EQ(*ParseLevel("DEBUG"), Level::kDebug);
  EXPECT_EQ(*ParseLevel("Info"), Level::kInfo);
  EXPECT_EQ(*ParseLevel("warn"), Level::kWarn);
  EXPECT_EQ(*ParseLevel("warning"), Level::kWarn);
  EXPECT_EQ(*ParseLevel("error"), Level::kError);
  EXPECT_EQ(*ParseLevel("off"), Level::kOff);
  for (Level l :
       {Level::kTrace, Level::kDebug, Level::kInfo, Level::kWarn, Level::kError, Level::kOff}) {
    EXPECT_EQ(*ParseLevel(LevelName(l)), l);
  }
}

TEST(LogTest, AnUnknownLevelNamesTheValueAndTheChoices) {
  auto l = ParseLevel("loud");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("\"loud\""), std::string::npos);
  EXPECT_NE(l.status().message().find("trace, debug, info, warn, error or off"), std::string::npos);
}

TEST(LogTest, VerbosityCountsRaiseTheLevel) {
  EXPECT_EQ(LevelForVerbosity(0), Level::kWarn);
  EXPECT_EQ(LevelForVerbosity(1), Level::kInfo);
  EXPECT_EQ(LevelForVerbosity(2), Level::kDebug);
  EXPECT_EQ(LevelForVerbosity(5), Level::kDebug);
}

TEST(LogTest, EnvironmentVariableIsParsedAndNamedInErrors) {
  ::unsetenv(kLevelEnv);
  auto unset = LevelFromEnv();
  ASSERT_TRUE(unset.ok());
  EXPECT_FALSE(unset->has_value());
  ::setenv(kLevelEnv, "debug", 1);
  auto debug = LevelFromEnv();
  ASSERT_TRUE(debug.ok());
  EXPECT_EQ(**debug, Level::kDebug);
  ::setenv(kLevelEnv, "chatty", 1);
  auto bad = LevelFromEnv();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("FATHOM_LOG_LEVEL"), std::string::npos);
  ::unsetenv(kLevelEnv);
}

TEST(LogTest, TheLevelGatesWhatIsWrittenAndEvaluated) {
  SetLevel(Level::kWarn);
  EXPECT_FALSE(Enabled(Level::kInfo));
  EXPECT_TRUE(Enabled(Level::kWarn));
  EXPECT_TRUE(Enabled(Level::kError));
  int built = 0;
  auto message = [&] {
    ++built;
    return std::string("a line");
  };
  FATHOM_LOG(kInfo, message());
  EXPECT_EQ(built, 0) << "a dropped line must not be formatted";
  testing::internal::CaptureStderr();
  FATHOM_LOG(kWarn, message());
  SetLevel(Level::kDebug);
  FATHOM_LOG(kDebug, "debug line");
  FATHOM_LOG(kTrace, "trace line");
  SetLevel(Level::kOff);
  FATHOM_LOG(kError, "error line");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(built, 1);
  EXPECT_NE(err.find("[warning] a line"), std::string::npos) << err;
  EXPECT_NE(err.find("[debug] debug line"), std::string::npos) << err;
  EXPECT_EQ(err.find("trace line"), std::string::npos) << err;
  EXPECT_EQ(err.find("error line"), std::string::npos) << err;
  SetLevel(kDefaultLevel);
}

}  // namespace
}  // namespace fathom::log
