// The jail helper as the supervisor opens it (sandbox/jail_client/jail_helper.cpp): the build's
// own helper is taken; a file someone else could replace, or that is not a program, is refused
// with the fix named; a running kernel keeps the helper it opened even if the file is replaced.
#include "sandbox/jail_client/jail_helper.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "sandbox/jail_client/worker_process.hpp"
#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

TEST_CASE("the build's jail helper is opened above the child's descriptors", "[jail_helper]") {
  auto helper = JailHelper::open(BELLJAR_JAIL_HELPER);
  REQUIRE(helper);
  CHECK(helper->fd() >= 10);
  CHECK(helper->path() == BELLJAR_JAIL_HELPER);
}

TEST_CASE("a jail helper that others could replace, or is no program, is refused",
          "[jail_helper]") {
  TempDir dir;
  fs::path copy = dir / "belljar-jail";
  fs::copy_file(BELLJAR_JAIL_HELPER, copy);
  ::chmod(copy.c_str(), 0755);
  CHECK(JailHelper::open(copy));  // the control: a private copy is fine

  ::chmod(copy.c_str(), 0775);
  CHECK_THROWS_WITH(JailHelper::open(copy), Catch::Contains("writable by its group or by others") &&
                                                Catch::Contains("chmod go-w"));
  ::chmod(copy.c_str(), 0757);
  CHECK_THROWS_WITH(JailHelper::open(copy), Catch::Contains("writable by its group or by others"));
  ::chmod(copy.c_str(), 0644);
  CHECK_THROWS_WITH(JailHelper::open(copy), Catch::Contains("not executable"));
  ::chmod(copy.c_str(), 0755);

  CHECK_THROWS_WITH(JailHelper::open(dir.path), Catch::Contains("is not a file"));
  CHECK_THROWS_WITH(JailHelper::open(dir / "missing"),
                    Catch::Contains("No such file") && Catch::Contains("reinstall"));

  if (::geteuid() == 0) {
    // Root's kernel never execs a helper another user owns.
    REQUIRE(::chown(copy.c_str(), 65534, 65534) == 0);
    CHECK_THROWS_WITH(JailHelper::open(copy), Catch::Contains("belongs to uid 65534"));
  }
}

TEST_CASE("a kernel keeps the helper it opened when the file is replaced", "[sandbox]") {
  TempDir dir;
  fs::path copy = dir / "belljar-jail";
  fs::copy_file(BELLJAR_JAIL_HELPER, copy);
  ::chmod(copy.c_str(), 0755);
  FakeWorker fake(R"PY(
report({'ok': True})
)PY");
  TempDir ws;
  WorkerLaunch launch = fake.launch();
  launch.jail_helper = JailHelper::open(copy);
  // Replaced (as an upgrade's rename would) by something that is not the helper at all.
  fs::path replacement = dir / "replacement";
  write_file(replacement, "#!/bin/sh\nexit 3\n");
  ::chmod(replacement.c_str(), 0755);
  fs::rename(replacement, copy);
  WorkerProcess worker = WorkerProcess::start(test_policy(ws.path), launch);
  auto run = collect(worker);
  CHECK(run.result()["ok"] == true);
}
