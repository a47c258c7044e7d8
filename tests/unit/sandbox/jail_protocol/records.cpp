// What the supervisor and the jail helper say to each other (sandbox/jail_protocol/): the
// record encoding, the JailSpec and the reports read back as they were written, anything cut
// short or malformed refused with the field named, frames split however they arrive.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "sandbox/jail_protocol/jail_channel.hpp"
#include "sandbox/jail_protocol/jail_reports.hpp"
#include "sandbox/jail_protocol/jail_spec.hpp"
#include "sandbox/jail_protocol/record.hpp"
#include "sandbox/os/fd.hpp"

using namespace belljar;

namespace {

JailSpec full_spec() {
  JailSpec spec;
  spec.mode = JailSpec::Mode::landlock;
  spec.strict = false;
  spec.host_root = true;
  spec.host_uid = 65534;
  spec.host_gid = 65533;
  spec.workspace = "/home/learner/course week 1";
  spec.binds = {
      {"/usr", "/usr", JailBind::Kind::read_only},
      {"/home/learner/course week 1", "/home/learner/course week 1", JailBind::Kind::workspace},
      {"/dev/null", "/dev/null", JailBind::Kind::device}};
  spec.links = {{"/lib", "usr/lib"}, {"/bin", "usr/bin"}};
  spec.hide_patterns = {".env", "*.pem", "/data/private"};
  spec.protect_patterns = {".git", ".envrc"};
  spec.workspace_quota_bytes = 1ull << 40;
  spec.exec_path = "/usr/bin/python3.11";
  spec.argv = {"/usr/bin/python3.11", "-s", "-E", "-c", "import sys; print('a\nb')"};
  // Values may hold anything a --set-env value may: '=', newlines, bytes that are not UTF-8.
  spec.env = {"PATH=/usr/bin:/bin", "MULTI=line one\nline two", std::string("RAW=\xff\xfe\0x", 8),
              "EMPTY="};
  spec.files = {{"/etc/belljar/ca-bundle.pem", std::string(70000, 'c')}};
  spec.memory_bytes = 3ull << 30;
  spec.pids = 77;
  spec.file_size_bytes = 5;
  spec.tmp_size_bytes = 0;
  spec.open_files = 4096;
  spec.egress_port = 3128;
  return spec;
}

std::string field(std::string_view name, std::string_view value) {
  return RecordWriter().text(name, value).bytes();
}

// Every field of the spec away from its default, so a field the list leaves out reads back as
// its default and the round trip differs.
JailSpec every_field_set() {
  JailSpec spec = full_spec();
  spec.broker = false;
  spec.writable_patterns = {".git", ".cache/pip"};
  spec.tmp_size_bytes = 64ull << 20;
  spec.open_files = 321;
  return spec;
}

// The names for_each_field lists, in order.
template <typename T>
std::vector<std::string> listed_fields(const T& value) {
  std::vector<std::string> names;
  for_each_field(value, [&](std::string_view name, const auto&) { names.emplace_back(name); });
  return names;
}

// How many members an aggregate has: the most initializers its braces take.
struct AnyMember {
  template <typename T>
  operator T() const;
};

template <typename T, typename... Members>
constexpr size_t member_count() {
  if constexpr (requires { T{Members{}..., AnyMember{}}; })
    return member_count<T, Members..., AnyMember>();
  else
    return sizeof...(Members);
}

}  // namespace

TEST_CASE("a JailSpec reads back exactly as it was written", "[jail_protocol]") {
  JailSpec spec = full_spec();
  JailSpec back = JailSpec::decode(spec.encode());
  CHECK(back.mode == spec.mode);
  CHECK(back.strict == spec.strict);
  CHECK(back.host_root == spec.host_root);
  CHECK(back.host_uid == spec.host_uid);
  CHECK(back.host_gid == spec.host_gid);
  CHECK(back.workspace == spec.workspace);
  REQUIRE(back.binds.size() == spec.binds.size());
  for (size_t i = 0; i < spec.binds.size(); ++i) {
    CHECK(back.binds[i].source == spec.binds[i].source);
    CHECK(back.binds[i].target == spec.binds[i].target);
    CHECK(back.binds[i].kind == spec.binds[i].kind);
  }
  REQUIRE(back.links.size() == 2);
  CHECK(back.links[1].path == "/bin");
  CHECK(back.links[1].points_to == "usr/bin");
  CHECK(back.hide_patterns == spec.hide_patterns);
  CHECK(back.protect_patterns == spec.protect_patterns);
  CHECK(back.workspace_quota_bytes == spec.workspace_quota_bytes);
  CHECK(back.exec_path == spec.exec_path);
  CHECK(back.argv == spec.argv);
  CHECK(back.env == spec.env);
  REQUIRE(back.files.size() == 1);
  CHECK(back.files[0].text == spec.files[0].text);
  CHECK(back.memory_bytes == spec.memory_bytes);
  CHECK(back.pids == spec.pids);
  CHECK(back.file_size_bytes == spec.file_size_bytes);
  CHECK(back.tmp_size_bytes == 0);
  CHECK(back.open_files == spec.open_files);
  CHECK(back.egress_port == spec.egress_port);
}

TEST_CASE("a JailSpec with every field set reads back equal to it", "[jail_protocol]") {
  const JailSpec spec = every_field_set();
  // Each listed field is set away from its default, so each one is checked below.
  RecordError error;
  const std::string bytes = spec.encode(), default_bytes = JailSpec{}.encode();
  auto written = Record::parse(bytes, &error);
  auto defaults = Record::parse(default_bytes, &error);
  REQUIRE(written);
  REQUIRE(defaults);
  for (const auto& name : listed_fields(spec)) {
    INFO(name);
    CHECK(written->all(name) != defaults->all(name));
  }
  CHECK(JailSpec::decode(bytes) == spec);
  CHECK_FALSE(JailSpec::decode(default_bytes) == spec);
}

TEST_CASE("the spec's field list names every member once", "[jail_protocol]") {
  // A member missing from for_each_field would be neither sent nor read back.
  auto names = listed_fields(JailSpec{});
  CHECK(names.size() == member_count<JailSpec>());
  CHECK(listed_fields(JailBind{}).size() == member_count<JailBind>());
  CHECK(listed_fields(JailLink{}).size() == member_count<JailLink>());
  CHECK(listed_fields(JailFile{}).size() == member_count<JailFile>());
  std::sort(names.begin(), names.end());
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
  CHECK(std::count(names.begin(), names.end(), "protocol") == 0);  // the envelope's, first
}

TEST_CASE("a spec cut short anywhere is refused, never misread", "[jail_protocol]") {
  const std::string bytes = full_spec().encode();
  // Every cut of the record's head and a sample of the rest (the CA bundle is long).
  for (size_t cut = 0; cut < bytes.size(); cut += cut < 2000 ? 1 : 997) {
    INFO("cut at " << cut << " of " << bytes.size());
    CHECK_THROWS_AS(JailSpec::decode(std::string_view(bytes).substr(0, cut)), RecordError);
  }
}

TEST_CASE("a spec from a helper of another build is refused naming both protocols",
          "[jail_protocol]") {
  std::string other = RecordWriter().number("protocol", kJailProtocolVersion + 1).bytes();
  try {
    JailSpec::decode(other);
    FAIL("decoded a spec of another protocol");
  } catch (const RecordError& e) {
    CHECK_THAT(e.message,
               Catch::Contains("jail protocol " + std::to_string(kJailProtocolVersion + 1)));
    CHECK_THAT(e.message, Catch::Contains("same build"));
  }
}

TEST_CASE("a malformed field is refused with its name", "[jail_protocol]") {
  std::string good = full_spec().encode();
  struct Row {
    std::string extra_first;  // a field placed before the good ones wins (first value read)
    std::string named;
  };
  const Row rows[] = {
      {field("pids", "12x"), "pids"},
      {field("pids", "-1"), "pids"},
      {field("pids", ""), "pids"},
      {field("pids", "99999999999999999999999"), "pids"},
      {field("strict", "2"), "strict"},
      {field("host_uid", "4294967295"), "host_uid"},
      {field("egress_port", "65536"), "egress_port"},
      {field("mode", "chroot"), "mode"},
      {field("bind",
             RecordWriter().text("source", "/x").text("target", "/x").text("kind", "rw").bytes()),
       "bind"},
      {field("bind", RecordWriter().text("source", "/x").bytes()), "target"},
  };
  for (const auto& row : rows) {
    INFO(row.named);
    // The protocol field must come first for the version check; the bad field right after it.
    std::string bytes =
        RecordWriter().number("protocol", kJailProtocolVersion).bytes() + row.extra_first + good;
    try {
      JailSpec::decode(bytes);
      FAIL("decoded a spec with a bad " << row.named);
    } catch (const RecordError& e) {
      CHECK_THAT(e.message, Catch::Contains("\"" + row.named + "\""));
    }
  }
  // A required field missing altogether.
  try {
    JailSpec::decode(RecordWriter().number("protocol", kJailProtocolVersion).bytes());
    FAIL("decoded an empty spec");
  } catch (const RecordError& e) {
    CHECK_THAT(e.message, Catch::Contains("is missing"));
  }
}

TEST_CASE("a record keeps repeated names in order and refuses impossible lengths",
          "[jail_protocol]") {
  std::string bytes =
      RecordWriter().text("a", "1").text("b", "x").text("a", "2").text("a", "").bytes();
  RecordError error;
  auto record = Record::parse(bytes, &error);
  REQUIRE(record);
  CHECK(record->texts("a") == std::vector<std::string>{"1", "2", ""});
  CHECK(record->text("b") == "x");
  CHECK_FALSE(record->has("c"));
  CHECK(record->number_or("c", 7) == 7);

  std::string empty_name("\0\0\0\0\0", 5);
  CHECK_FALSE(Record::parse(empty_name, &error));
  CHECK_THAT(error.message, Catch::Contains("empty name"));
  std::string too_long = std::string("\1a\0\0\0\x09", 6) + "short";  // says 9 bytes, has 5
  CHECK_FALSE(Record::parse(too_long, &error));
  CHECK_THAT(error.message, Catch::Contains("\"a\" runs past the end"));
  std::string huge = std::string("\1a\xff\xff\xff\xff", 6);
  CHECK_FALSE(Record::parse(huge, &error));
}

TEST_CASE("every report reads back as it was sent", "[jail_protocol]") {
  ReadyReport ready{4242, {"/sys/fs/cgroup/belljar-7", "", "", ""}, {"memory: no cgroup", "x"}};
  auto r = decode_report(encode(ready));
  REQUIRE(std::holds_alternative<ReadyReport>(r));
  CHECK(std::get<ReadyReport>(r).worker_pid == 4242);
  CHECK(std::get<ReadyReport>(r).cgroup.v2 == "/sys/fs/cgroup/belljar-7");
  CHECK(std::get<ReadyReport>(r).notes == ready.notes);
  // Init's ready report names no pid.
  CHECK(std::get<ReadyReport>(decode_report(encode(ReadyReport{}))).worker_pid == -1);

  auto e = decode_report(encode(ErrorReport{"mount(tmpfs, /tmp): EPERM"}));
  CHECK(std::get<ErrorReport>(e).message == "mount(tmpfs, /tmp): EPERM");

  ExitReport killed;
  killed.signal = 9;
  killed.memory_limit = true;
  killed.memory_total_bytes = 1ull << 30;
  killed.cpu_ns = 1234567;
  killed.peak_memory_bytes = 99;
  auto x = std::get<ExitReport>(decode_report(encode(killed)));
  CHECK(x.code == -1);
  CHECK(x.signal == 9);
  CHECK(x.memory_limit);
  CHECK(x.memory_total_bytes == 1ull << 30);
  CHECK(x.cpu_ns == 1234567);
  CHECK(x.peak_memory_bytes == 99);
  ExitReport exited;
  exited.code = 3;
  CHECK(std::get<ExitReport>(decode_report(encode(exited))).code == 3);
  CHECK(std::get<ExitReport>(decode_report(encode(exited))).cpu_ns == -1);

  SurveyReport survey;
  survey.guarded = {{".git", GuardKind::read_only, ".git"}, {"a/.env", GuardKind::mask, ".env"}};
  survey.bytes = 10;
  survey.added_bytes = 0;
  survey.entries = 3;
  survey.over_quota = true;
  survey.micros = 1500;
  auto s = std::get<SurveyReport>(decode_report(encode(survey)));
  REQUIRE(s.guarded.size() == 2);
  CHECK(s.guarded[0].kind == GuardKind::read_only);
  CHECK(s.guarded[1].path == "a/.env");
  CHECK(s.bytes == 10u);
  CHECK(s.added_bytes == 0u);
  CHECK(s.over_quota);
  CHECK_FALSE(s.read_only);
  CHECK(s.micros == 1500);
  SurveyReport quick;  // unmeasured: no byte counts at all
  CHECK_FALSE(std::get<SurveyReport>(decode_report(encode(quick))).bytes);

  SurveyRequest request{std::nullopt, true};
  CHECK(SurveyRequest::decode(request.encode()).measure);
  CHECK_FALSE(SurveyRequest::decode(request.encode()).baseline);
  CHECK(SurveyRequest::decode(SurveyRequest{77, false}.encode()).baseline == 77u);
}

TEST_CASE("a report of an unknown kind or with a bad field is refused", "[jail_protocol]") {
  CHECK_THROWS_AS(decode_report(field("event", "reboot")), RecordError);
  CHECK_THROWS_AS(decode_report(field("message", "no event")), RecordError);
  CHECK_THROWS_AS(decode_report(field("event", "exit") + field("signal", "70000")), RecordError);
  CHECK_THROWS_AS(decode_report(field("event", "ready") + field("worker_pid", "-5")), RecordError);
  CHECK_THROWS_AS(
      decode_report(
          field("event", "survey") +
          field("guarded", RecordWriter().text("path", "x").text("guard", "hidden").bytes())),
      RecordError);
  CHECK_THROWS_AS(SurveyRequest::decode(field("op", "format")), RecordError);
}

TEST_CASE("frames arrive whole however the bytes are split", "[jail_protocol]") {
  int sp[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp) == 0);
  Fd writer(sp[0]), reader_fd(sp[1]);
  std::string stream =
      frame_of(encode(ErrorReport{"first"})) + frame_of("") + frame_of(encode(ExitReport{}));
  FrameReader reader(reader_fd.get());
  std::vector<std::string> frames;
  for (char c : stream) {  // one byte at a time
    REQUIRE(::write(writer.get(), &c, 1) == 1);
    reader.fill();
    while (auto frame = reader.next()) frames.push_back(*frame);
  }
  REQUIRE(frames.size() == 3);
  CHECK(std::get<ErrorReport>(decode_report(frames[0])).message == "first");
  CHECK(frames[1].empty());
  CHECK(std::holds_alternative<ExitReport>(decode_report(frames[2])));
  writer.reset();
  CHECK(reader.fill());  // EOF
  CHECK_FALSE(reader.broken());
}

TEST_CASE("a frame over the reader's cap breaks the channel instead of growing a buffer",
          "[jail_protocol]") {
  int sp[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp) == 0);
  Fd writer(sp[0]), reader_fd(sp[1]);
  FrameReader reader(reader_fd.get(), 64);
  REQUIRE(send_frame(writer.get(), std::string(65, 'x')));
  reader.fill();
  CHECK_FALSE(reader.next());
  CHECK(reader.broken());
  // And one within the cap after a broken one is not read either: the channel is done.
  REQUIRE(send_frame(writer.get(), "ok"));
  reader.fill();
  CHECK_FALSE(reader.next());

  // A blocking read of one frame refuses the oversized one with a reason.
  int bp[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, bp) == 0);
  Fd w(bp[0]), r(bp[1]);
  REQUIRE(send_frame(w.get(), std::string(100, 'y')));
  std::string why;
  CHECK_FALSE(read_frame(r.get(), 99, &why));
  CHECK_THAT(why, Catch::Contains("over the cap of 99"));
  REQUIRE(send_frame(w.get(), "spec"));
  w.reset();
  // The oversized frame's body was never read: what follows is its bytes, not a frame. The
  // warden gives up at the first bad frame, so this only has to fail, never hang.
  auto next = read_frame(r.get(), 1u << 20, &why);
  CHECK_FALSE(next);
}
