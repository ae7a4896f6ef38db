// A gtest fixture base that boots one testbed for every test of a suite and
// tears it down after the last one: each VM boot costs seconds under TCG.
// A suite says which testbed it wants:
//   class FooVmTest : public SharedTestbedTest<FooVmTest> {
//    public:
//     static TestbedOptions Options() { ... }
//   };
// Tests use tb_; when the testbed did not start, every test fails with why.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "testbed/testbed.h"

namespace fathom::testbed {

template <typename Suite>
class SharedTestbedTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    auto tb = Testbed::Start(Suite::Options());
    if (tb.ok()) {
      tb_ = tb->release();
    } else {
      error_ = new std::string(tb.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    delete tb_;  // stops the VMs it started
    tb_ = nullptr;
    delete error_;
    error_ = nullptr;
  }

 protected:
  void SetUp() override {
    if (tb_ == nullptr) FAIL() << "testbed did not start: " << (error_ ? *error_ : "");
  }

  static inline Testbed* tb_ = nullptr;
  static inline std::string* error_ = nullptr;
};

}  // namespace fathom::testbed
