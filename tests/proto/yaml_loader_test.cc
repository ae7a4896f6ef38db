// The YAML -> Protobuf loader: every field kind, the source map, and the
// exact file:line:column + field path of each rejected input.
#include "proto/yaml_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "loader_test.pb.h"
#include "proto/topology.pb.h"
#include "tests/scratch_dir.h"

namespace fathom::config {
namespace {

using ::fathom::test::Everything;
using ::testing::HasSubstr;

TEST(YamlLoaderTest, LoadsEveryFieldKind) {
  Everything m;
  SourceMap map;
  const Status s = LoadYamlString(R"(i32: -2147483648
i64: 9223372036854775807
u32: 0xffffffff
u64: 18446744073709551615
d: 2.5e-3
f: .inf
b: TRUE
s: hello
color: dark_blue
ints: [1, 2, 3]
inners:
  - {a: 1, s: x}
  - s: y
inner: {s: z}
counts: {a: 1, b: 2}
named:
  one: {s: w, a: 7}
y: 5
colors: [red, COLOR_DARK_BLUE]
maybe: 0
)",
                                  "all.yaml", &m, {.source_map = &map});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(m.i32(), INT32_MIN);
  EXPECT_EQ(m.i64(), INT64_MAX);
  EXPECT_EQ(m.u32(), 0xffffffffu);
  EXPECT_EQ(m.u64(), UINT64_MAX);
  EXPECT_DOUBLE_EQ(m.d(), 2.5e-3);
  EXPECT_TRUE(std::isinf(m.f()));
  EXPECT_TRUE(m.b());
  EXPECT_EQ(m.s(), "hello");
  EXPECT_EQ(m.color(), Everything::COLOR_DARK_BLUE);
  ASSERT_EQ(m.ints_size(), 3);
  EXPECT_EQ(m.ints(2), 3);
  ASSERT_EQ(m.inners_size(), 2);
  EXPECT_EQ(m.inners(1).s(), "y");
  EXPECT_EQ(m.inner().s(), "z");
  EXPECT_EQ(m.counts().at("b"), 2);
  EXPECT_EQ(m.named().at("one").a(), 7);
  EXPECT_EQ(m.y(), 5);
  ASSERT_EQ(m.colors_size(), 2);
  EXPECT_EQ(m.colors(0), Everything::COLOR_RED);
  EXPECT_TRUE(m.has_maybe());
  // Source map: where each path was written.
  ASSERT_TRUE(map.Find("inners[1].s").has_value());
  EXPECT_EQ(map.Find("inners[1].s")->line, 13);
  EXPECT_EQ(map.Find("inners[1].s")->column, 8);
  EXPECT_EQ(map.Where("named[one].a"), "all.yaml:17:18");
  EXPECT_EQ(map.Where("inner.a"), "all.yaml:14:8");  // not written: nearest ancestor
  EXPECT_EQ(map.Where("nothing.here"), "all.yaml:1:1");
  EXPECT_EQ(map.Error("ints[1]", "too big").message(), "all.yaml:10:11: ints[1]: too big");
}

TEST(YamlLoaderTest, EmptyDocumentAndNullValues) {
  Everything m;
  EXPECT_TRUE(LoadYamlString("", "e.yaml", &m).ok());
  EXPECT_TRUE(LoadYamlString("ints:\ncounts:\ninners:\n", "e.yaml", &m).ok());
  EXPECT_EQ(m.ints_size(), 0);
  // `inner:` with nothing is an empty Inner, which lacks its required key.
  EXPECT_EQ(LoadYamlString("i32: 1\ninner:\n", "e.yaml", &m).message(),
            "e.yaml:2:1: inner: missing required key 's'");
}

struct BadCase {
  const char* name;
  const char* yaml;
  const char* error;  // the whole message
};

class YamlLoaderBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(YamlLoaderBadInput, NamesFileLineColumnAndField) {
  Everything m;
  const Status s = LoadYamlString(GetParam().yaml, "bad.yaml", &m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, YamlLoaderBadInput,
    ::testing::Values(
        BadCase{"UnknownKey", "i32: 1\ni33: 2\n",
                "bad.yaml:2:1: i33: unknown key (Everything has: i32, i64, u32, u64, d, f, b, s, "
                "color, ints, inners, inner, counts, named, x, y, colors, maybe)"},
        BadCase{"NotAnInteger", "inner:\n  s: q\n  a: eight\n",
                "bad.yaml:3:6: inner.a: expected an integer, got 'eight'"},
        BadCase{"Int32Overflow", "i32: 2147483648\n",
                "bad.yaml:1:6: i32: 2147483648 is out of range for int32 [-2147483648, "
                "2147483647]"},
        BadCase{"NegativeUnsigned", "u32: -1\n",
                "bad.yaml:1:6: u32: -1 is out of range for uint32 [0, 4294967295]"},
        BadCase{"Int64Overflow", "i64: 99999999999999999999\n",
                "bad.yaml:1:6: i64: 99999999999999999999 is out of range for int64 "
                "[-9223372036854775808, 9223372036854775807]"},
        BadCase{"FloatIntoInt", "i32: 1.5\n", "bad.yaml:1:6: i32: expected an integer, got '1.5'"},
        BadCase{"BadEnum", "color: purple\n",
                "bad.yaml:1:8: color: unknown Color 'purple' (one of: unspecified, red, "
                "dark_blue)"},
        BadCase{"BadBool", "b: yes\n", "bad.yaml:1:4: b: expected true or false, got 'yes'"},
        BadCase{"QuotedNumber", "d: \"2\"\n",
                "bad.yaml:1:4: d: expected an unquoted number, got the string '2'"},
        BadCase{"NotANumber", "d: fast\n", "bad.yaml:1:4: d: expected a number, got 'fast'"},
        BadCase{"ListForScalar", "s: [a, b]\n", "bad.yaml:1:4: s: expected a string, got a list"},
        BadCase{"ScalarForList", "ints: 3\n", "bad.yaml:1:7: ints: expected a list, got '3'"},
        BadCase{"ScalarForMessage", "inner: 3\n",
                "bad.yaml:1:8: inner: expected a map of Inner fields, got '3'"},
        BadCase{"BadListItem", "ints: [1, 2, x]\n",
                "bad.yaml:1:14: ints[2]: expected an integer, got 'x'"},
        BadCase{"NestedUnknownKey", "inners:\n  - s: a\n  - s: b\n    c: 1\n",
                "bad.yaml:4:5: inners[1].c: unknown key (Inner has: a, s)"},
        BadCase{"MissingRequired", "inners:\n  - s: a\n  - a: 1\n",
                "bad.yaml:3:5: inners[1]: missing required key 's'"},
        BadCase{"DuplicateKey", "i32: 1\nb: true\ni32: 2\n", "bad.yaml:3:1: i32: duplicate key"},
        BadCase{"TwoOneofMembers", "x: a\ny: 2\n",
                "bad.yaml:2:1: y: 'x' is already set; they are alternatives (oneof choice)"},
        BadCase{"BadMapValue", "counts:\n  a: 1\n  b: two\n",
                "bad.yaml:3:6: counts[b]: expected an integer, got 'two'"},
        BadCase{"RootNotAMap", "- 1\n- 2\n",
                "bad.yaml:1:1: <root>: expected a map of Everything fields, got a list"},
        BadCase{"SyntaxError", "inner: {s: a\ni32: 1\n",
                "bad.yaml:2:4: YAML syntax error: end of map flow not found"},
        BadCase{"NullScalar", "i32:\nb: true\n",
                "bad.yaml:1:1: i32: expected an integer, got nothing"},
        BadCase{"FloatOverflow", "f: 1e39\n", "bad.yaml:1:4: f: 1e39 is out of range for float"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(YamlLoaderTest, ValidatorErrorsUseTheSourceMap) {
  Everything m;
  YamlLoadOptions options;
  options.validator = [](const google::protobuf::Message& msg, const std::string& path,
                         const SourceMap& map) -> Status {
    if (const auto* inner = dynamic_cast<const fathom::test::Inner*>(&msg);
        inner != nullptr && inner->a() % 2 != 0) {
      return map.Error(JoinPath(path, "a"), "must be even");
    }
    return Status::Ok();
  };
  const Status s = LoadYamlString("i32: 1\ninners:\n  - {s: x, a: 2}\n  - {s: y, a: 3}\n", "v.yaml",
                                  &m, options);
  EXPECT_EQ(s.message(), "v.yaml:4:15: inners[1].a: must be even");
}

TEST(YamlLoaderTest, FilesAndTheirErrors) {
  test_util::ScratchDir tmp;
  const std::string path = tmp.Write("loader_test.yaml", "fat_tree:\n  k: eight\n");
  fathom::proto::TopologySpec spec;
  const Status s = LoadYamlFile(path, &spec);
  EXPECT_EQ(s.message(), path + ":2:6: fat_tree.k: expected an integer, got 'eight'");
  const Status missing = LoadYamlFile("/nonexistent/dir/x.yaml", &spec);
  EXPECT_EQ(missing.code(), StatusCode::kIoError);
  EXPECT_THAT(missing.message(), HasSubstr("LoadYamlFile(/nonexistent/dir/x.yaml): cannot open"));
}

TEST(YamlLoaderTest, EnumsWithOrWithoutPrefixAnyCase) {
  fathom::proto::TopologySpec spec;
  ASSERT_TRUE(
      LoadYamlString("cluster_network:\n  node_type: x\n  scale_levels:\n"
                     "    - {level: a, gpu_count: 1, servers: 1, connection: NPO_optical_ENGINE}\n"
                     "    - {level: b, gpu_count: 1, servers: 1, "
                     "connection: connection_copper_cable_switch}\n",
                     "t.yaml", &spec)
          .ok());
  EXPECT_EQ(spec.cluster_network().scale_levels(0).connection(),
            fathom::proto::ClusterNetwork::CONNECTION_NPO_OPTICAL_ENGINE);
  EXPECT_EQ(spec.cluster_network().scale_levels(1).connection(),
            fathom::proto::ClusterNetwork::CONNECTION_COPPER_CABLE_SWITCH);
}

TEST(YamlLoaderTest, ClearsTheMessageFirst) {
  Everything m;
  m.set_i32(5);
  ASSERT_TRUE(LoadYamlString("s: a\n", "c.yaml", &m).ok());
  EXPECT_EQ(m.i32(), 0);
}

// Issue 24: what is not a YAML file is said to be so, without reading it
// whole or echoing its bytes.
TEST(YamlLoaderInputTest, DirectoriesAndDevicesAreRefusedByKind) {
  fathom::proto::TopologySpec spec;
  const Status dir = LoadYamlFile(testing::TempDir(), &spec);
  EXPECT_EQ(dir.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(dir.message(), HasSubstr("is a directory, not a YAML file"));
  // /dev/zero never ends; it must be refused before any read.
  const Status zero = LoadYamlFile("/dev/zero", &spec);
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(zero.message(), HasSubstr("/dev/zero: is a character device"));
}

TEST(YamlLoaderInputTest, FilesOverTheCapAreRefused) {
  test_util::ScratchDir tmp;
  const std::string path = tmp.File("loader_big.yaml");
  {
    std::ofstream out(path);
    const std::string line(1023, '#');
    for (size_t i = 0; i < kMaxYamlBytes / 1024 + 1; ++i) out << line << '\n';
  }
  fathom::proto::TopologySpec spec;
  const Status s = LoadYamlFile(path, &spec);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("is more than the 16 MiB a YAML file may hold"));
  const std::string text(kMaxYamlBytes + 1, ' ');
  EXPECT_THAT(LoadYamlString(text, "big", &spec).message(), HasSubstr("16 MiB"));
}

TEST(YamlLoaderInputTest, FifosAreReadThroughTheBound) {
  // In a directory of this test's own: two runs of the suite at once (two
  // build trees) must not open each other's FIFO, which blocks the writer
  // forever.
  test_util::ScratchDir tmp;
  const std::string path = tmp.File("loader_fifo.yaml");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(path) << "fat_tree: {k: 4}\n"; });
  fathom::proto::TopologySpec spec;
  const Status s = LoadYamlFile(path, &spec);
  writer.join();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(spec.fat_tree().k(), 4);
}

// A writer that comes late (the loader already holds the FIFO open) and one
// that writes in two pieces: the loader waits for the first writer and reads
// until the last one closes, never taking the empty FIFO for an empty file.
TEST(YamlLoaderInputTest, FifosWaitForALateWriterAndReadToItsEnd) {
  test_util::ScratchDir tmp;
  const std::string path = tmp.File("loader_fifo_late.yaml");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::ofstream out(path);
    out << "fat_tree:" << std::flush;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    out << " {k: 6}\n";
  });
  fathom::proto::TopologySpec spec;
  const Status s = LoadYamlFile(path, &spec);
  writer.join();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(spec.fat_tree().k(), 6);
}

TEST(YamlLoaderInputTest, BinaryIsNotEchoed) {
  fathom::proto::TopologySpec spec;
  const Status nul = LoadYamlString(std::string("name: x\n\0\x01\x02", 11), "bin.yaml", &spec);
  EXPECT_EQ(nul.message(), "bin.yaml:2:1: not a text file (NUL byte at byte 8)");
  const Status utf = LoadYamlString("name: \xff\xfe\x1b[2J", "bin.yaml", &spec);
  EXPECT_EQ(utf.message(), "bin.yaml:1:7: not a text file (invalid UTF-8 at byte 6)");
  // Valid UTF-8 with terminal escapes: quoted back escaped.
  Everything m;
  const Status esc = LoadYamlString("i32: \x1b[31mred\x7f\n", "esc.yaml", &m);
  EXPECT_EQ(esc.message().find('\x1b'), std::string::npos) << esc.message();
  EXPECT_THAT(esc.message(), HasSubstr("'\\x1b[31mred\\x7f'"));
  const Status key = LoadYamlString("\x1b]0;owned\x07: 1\n", "esc.yaml", &m);
  EXPECT_EQ(key.message().find('\x1b'), std::string::npos) << key.message();
  EXPECT_THAT(key.message(), HasSubstr("unknown key"));
}

TEST(YamlLoaderInputTest, DeepNestingNamesTheProblemAndLine) {
  fathom::proto::TopologySpec spec;
  const std::string flow = "name: x\nfat_tree: " + std::string(3000, '[');
  const Status s = LoadYamlString(flow, "deep.yaml", &spec);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("deep.yaml:2:75:"));
  EXPECT_THAT(s.message(), HasSubstr("nested too deeply"));
  EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("bad file")));
  std::string block;
  for (int i = 0; i < 3000; ++i) block += std::string(static_cast<size_t>(i), ' ') + "- \n";
  const Status b = LoadYamlString("fat_tree:\n" + block, "deep.yaml", &spec);
  EXPECT_FALSE(b.ok());
  EXPECT_THAT(b.message(), ::testing::Not(HasSubstr("bad file")));
}

TEST(YamlLoaderInputTest, EscapeForTerminal) {
  EXPECT_EQ(EscapeForTerminal("plain é"), "plain é");
  EXPECT_EQ(EscapeForTerminal("a\nb\x1b\xc2\x9b"), "a\\x0ab\\x1b\\x9b");
  EXPECT_EQ(EscapeForTerminal(std::string(10, 'x'), 4), "xxxx...");
}

}  // namespace
}  // namespace fathom::config
