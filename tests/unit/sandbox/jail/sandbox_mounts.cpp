// The sandbox's mount list as the broker's judge weighs it: mountinfo's mount points (escapes
// undone), each point and every folder above it held and nothing else, a text that is not
// mountinfo's taken as no list, and a list read under a stamp only while no survey has begun or
// ended since.
#include "sandbox/jail/sandbox_mounts.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>

using namespace belljar;

namespace {

using Parts = std::vector<std::string>;

const char* const kMountinfo =
    "22 1 0:21 / / ro,relatime - tmpfs none rw\n"
    "23 22 0:22 / /tmp rw,nosuid - tmpfs tmpfs rw\n"
    "24 23 8:1 /home/u/ws /tmp/X/ws rw,relatime - ext4 /dev/sda1 rw\n"
    "25 24 8:1 /home/u/ws/.git /tmp/X/ws/.git ro,relatime - ext4 /dev/sda1 rw\n"
    "26 24 8:1 /home/u/ws/my\\040ref /tmp/X/ws/my\\040ref ro - ext4 /dev/sda1 rw\n";

}  // namespace

TEST_CASE("mountinfo's mount points are read with their escapes undone", "[sandbox-mounts]") {
  auto points = SandboxMounts::parse(kMountinfo);
  REQUIRE(points);
  CHECK(*points == std::vector<Parts>{{},
                                      {"tmp"},
                                      {"tmp", "X", "ws"},
                                      {"tmp", "X", "ws", ".git"},
                                      {"tmp", "X", "ws", "my ref"}});
  CHECK_FALSE(SandboxMounts::parse("22 1 0:21 / relative rw - tmpfs none rw\n"));
  CHECK_FALSE(SandboxMounts::parse("22 1 0:21 /\n"));
  CHECK_FALSE(SandboxMounts::parse("22 1 0:21 / /a\\04 rw - tmpfs none rw\n"));
  CHECK_FALSE(SandboxMounts::parse("22 1 0:21 / /a\\089 rw - tmpfs none rw\n"));
}

TEST_CASE("a mount point and every folder above it are held, nothing beside or below",
          "[sandbox-mounts]") {
  SandboxMounts mounts(*SandboxMounts::parse(kMountinfo));
  for (const Parts& held : std::vector<Parts>{{},
                                              {"tmp"},
                                              {"tmp", "X"},
                                              {"tmp", "X", "ws"},
                                              {"tmp", "X", "ws", ".git"},
                                              {"tmp", "X", "ws", "my ref"}}) {
    INFO(held.size());
    CHECK(mounts.at_or_above(held));
  }
  for (const Parts& free : std::vector<Parts>{{"tmp", "Y"},
                                              {"tmp", "X", "other"},
                                              {"tmp", "X", "ws", "data"},
                                              {"tmp", "X", "ws", ".git", "config"},
                                              {"tmp", "X", "ws", "my"},
                                              {"usr"}}) {
    INFO(free.size());
    CHECK_FALSE(mounts.at_or_above(free));
  }
}

TEST_CASE("a list read under a stamp is current until a survey begins", "[sandbox-mounts]") {
  MountChanges changes;
  SandboxMounts mounts;
  CHECK_FALSE(mounts.current(changes.stamp()));  // never read
  REQUIRE(mounts.read(::getpid(), changes.stamp()));
  CHECK(mounts.at_or_above({"proc"}));  // this process's own mounts
  CHECK(mounts.current(changes.stamp()));
  changes.surveying();
  CHECK_FALSE(changes.stamp());
  CHECK_FALSE(mounts.current(changes.stamp()));  // read again for each move meanwhile
  REQUIRE(mounts.read(::getpid(), changes.stamp()));
  CHECK_FALSE(mounts.current(changes.stamp()));
  changes.surveyed();
  CHECK_FALSE(mounts.current(changes.stamp()));  // read before the survey ended
  REQUIRE(mounts.read(::getpid(), changes.stamp()));
  CHECK(mounts.current(changes.stamp()));
  // A process that is not there has no list, and what was read is not kept.
  CHECK_FALSE(mounts.read(0, changes.stamp()));
  CHECK_FALSE(mounts.current(changes.stamp()));
  CHECK_FALSE(mounts.at_or_above({}));
}
