// belljar's own installed files (sandbox/os/installed_file.cpp) as the modules meet it: a module
// needs no execute bit (Debian installs shared objects 0644), a program does; the build's egress
// module loads through the checked descriptor and gives its entry point; a file that is no
// module, or a module without the entry point asked for, is refused with the reason.
#include "sandbox/os/installed_file.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "sandbox/egress_api/egress_service.hpp"
#include "sandbox/os/setup_error.hpp"
#include "sandbox_harness.hpp"

using namespace belljar;
using namespace belljar::testing;

TEST_CASE("a module needs no execute bit, a program does", "[installed_file]") {
  TempDir dir;
  fs::path copy = dir / "belljar-egress.so";
  fs::copy_file(BELLJAR_EGRESS_MODULE, copy);
  ::chmod(copy.c_str(), 0644);
  Fd module = open_installed_file(copy, "the egress module", InstalledKind::module);
  CHECK(module.get() >= 10);
  CHECK_THROWS_WITH(open_installed_file(copy, "the jail helper", InstalledKind::executable),
                    Catch::Contains("the jail helper " + copy.string() + " is not executable"));
  ::chmod(copy.c_str(), 0664);
  CHECK_THROWS_WITH(open_installed_file(copy, "the egress module", InstalledKind::module),
                    Catch::Contains("writable by its group or by others: chmod go-w"));
}

TEST_CASE("the build's egress module loads and gives its entry point", "[installed_file]") {
  Fd module =
      open_installed_file(BELLJAR_EGRESS_MODULE, "the egress module", InstalledKind::module);
  void* entry = load_module_symbol(module, "the egress module", kEgressEntryPoint);
  REQUIRE(entry);
  // A proxy for no host and no secret: it starts, holds nothing, and hands out no CA bundle.
  std::string error;
  std::unique_ptr<EgressService> service(
      reinterpret_cast<EgressEntryPoint>(entry)(EgressStart{}, error));
  REQUIRE(service);
  CHECK(error.empty());
  CHECK(service->open_connections() == 0);
  CHECK(service->ca_bundle_pem().empty());
  CHECK(service->decisions_fd() >= 0);

  CHECK_THROWS_WITH(
      load_module_symbol(module, "the egress module", "belljar_no_such_entry"),
      Catch::Contains("has no belljar_no_such_entry") && Catch::Contains("another build"));
}

TEST_CASE("a file that is no module is refused, not run", "[installed_file]") {
  TempDir dir;
  fs::path fake = dir / "belljar-egress.so";
  std::ofstream(fake) << "#!/bin/sh\necho not a module\n";
  ::chmod(fake.c_str(), 0755);
  Fd file = open_installed_file(fake, "the egress module", InstalledKind::module);
  CHECK_THROWS_AS(load_module_symbol(file, "the egress module", kEgressEntryPoint), SetupError);
  CHECK_THROWS_WITH(load_module_symbol(file, "the egress module", kEgressEntryPoint),
                    Catch::Contains("cannot load the egress module"));
}
