#include <catch2/catch.hpp>

#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

TEST_CASE("a probe runs inside the sandbox and reports", "[sandbox]") {
  TempDir ws;
  auto run = run_probe("report({'uid': os.getuid(), 'cwd': os.getcwd(), 'ppid': os.getppid()})\n",
                       test_policy(ws.path));
  INFO("stderr: " << run.err);
  auto r = run.result();
  CHECK(r["uid"] == 1000);
  CHECK(r["cwd"] == ws.path.string());
  CHECK(r["ppid"] == 1);
  CHECK(run.exit.exit_code == 0);
}
