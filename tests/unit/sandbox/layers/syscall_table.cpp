// The syscall table against the architecture's: every call libseccomp names for this machine is
// classified (a call a newer libseccomp names fails this test until it is), every number past
// the table fails closed, and the filter does what the table says for each call.
#include "sandbox/layers/syscall_table.hpp"

#include <seccomp.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "sandbox/layers/seccomp_filter.hpp"

using namespace belljar;

namespace {

// The action the filter's pseudo-code gives a call with no argument test ("" when none).
std::string action_of(const std::string& pfc, int nr) {
  std::string test = "if ($syscall == " + std::to_string(nr) + ")\n";
  auto at = pfc.find(test);
  if (at == std::string::npos) return "";
  auto line = pfc.find('\n', at + test.size());
  std::string next = pfc.substr(at + test.size(), line - at - test.size());
  auto action = next.find("action ");
  return action == std::string::npos ? "" : next.substr(action + 7);
}

}  // namespace

TEST_CASE("every system call of this architecture is classified", "[syscall_table]") {
  int named = 0;
  std::set<std::string> unclassified;
  for (int nr = 0; nr < 4096; ++nr) {
    char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
    if (!name) continue;
    ++named;
    if (!classified(name)) unclassified.insert(name);
    std::free(name);
  }
  INFO("libseccomp names " << named << " calls; not in sandbox/layers/syscall_table.cpp:");
  for (const auto& name : unclassified) INFO(name);
  CHECK(unclassified.empty());
  CHECK(named > 300);  // the probe reads a real table
}

TEST_CASE("the table names each call once, with a reason, and every name is a call",
          "[syscall_table]") {
  std::set<std::string> seen;
  for (const auto& entry : syscall_table()) {
    INFO(entry.name);
    CHECK(seen.insert(entry.name).second);
    CHECK(std::string(entry.reason).size() > 10);
    CHECK((entry.kind == SyscallClass::refused) == (entry.error != 0));
  }
  // Calls newer than this libseccomp are found by their number, and so filtered.
  for (const char* name :
       {"fchmodat2", "setxattrat", "removexattrat", "getxattrat", "listxattrat", "open_tree_attr",
        "file_getattr", "file_setattr", "statmount", "listmount", "mseal"}) {
    INFO(name);
    CHECK(native_syscall_number(name) >= kUnifiedFirst);
    CHECK(classified(name) != nullptr);
  }
}

TEST_CASE("the filter does what the table says, and unclassified numbers fail closed",
          "[syscall_table]") {
  SeccompOptions options;
  options.broker = true;
  options.cpu_by_process_tree = true;  // every rule an argument decides is in the filter
  const std::string pfc = seccomp_pseudo_code(options);
  for (const auto& entry : syscall_table()) {
    int nr = native_syscall_number(entry.name);
    if (nr < 0) continue;
    INFO(entry.name << " (" << nr << "): " << class_name(entry.kind));
    std::string action = action_of(pfc, nr);
    switch (entry.kind) {
      case SyscallClass::refused:
        CHECK(action == "ERRNO(" + std::to_string(entry.error) + ");");
        break;
      case SyscallClass::brokered:
        CHECK((action == "NOTIFY;" || action == "0x7fc00000;"));  // libseccomp 2.5 spells it so
        break;
      case SyscallClass::harmless:
        CHECK(pfc.find("if ($syscall == " + std::to_string(nr) + ")") == std::string::npos);
        break;
      case SyscallClass::in_part:
        CHECK(pfc.find("if ($syscall == " + std::to_string(nr) + ")") != std::string::npos);
        CHECK(action == "");  // its test is on an argument
        break;
    }
  }
  for (int nr = kUnifiedFirst; nr < kUnclassifiedEnd; ++nr) {
    if (classified_number(nr)) continue;
    INFO(nr);
    CHECK(action_of(pfc, nr) == "ERRNO(38);");
  }
  // Extended attributes are refused as a filesystem without them would: shutil.copystat and
  // cp -a go on without them.
  CHECK(classified("setxattr")->error == EOPNOTSUPP);
  CHECK(classified("utimensat")->kind == SyscallClass::brokered);
}

TEST_CASE("SIGCHLD's action is refused only where the process tree counts the CPU",
          "[syscall_table]") {
  // A child reaped by the kernel (SIGCHLD ignored, SA_NOCLDWAIT) reaches no parent's cutime:
  // without a cgroup counting the CPU, setting SIGCHLD's action is refused; querying it is not.
  const std::string rt_sigaction =
      "if ($syscall == " + std::to_string(SCMP_SYS(rt_sigaction)) + ")";
  SeccompOptions counted_by_cgroup;
  CHECK(seccomp_pseudo_code(counted_by_cgroup).find(rt_sigaction) == std::string::npos);
  SeccompOptions by_tree;
  by_tree.cpu_by_process_tree = true;
  const std::string pfc = seccomp_pseudo_code(by_tree);
  auto at = pfc.find(rt_sigaction);
  REQUIRE(at != std::string::npos);
  auto end = pfc.find("# filter for syscall", at);
  std::string rule = pfc.substr(at, end == std::string::npos ? std::string::npos : end - at);
  INFO(rule);
  // The signal number's high half is not tested: the kernel reads an int.
  CHECK(rule.find("$a0.hi32 & 0x00000000 == 0") != std::string::npos);
  CHECK(rule.find("$a0.lo32 & 0xffffffff == 17") != std::string::npos);
  CHECK(rule.find("ERRNO(1)") != std::string::npos);
  CHECK(classified("rt_sigaction")->kind == SyscallClass::in_part);
}

TEST_CASE("docs/security.md shows the same table", "[syscall_table]") {
  std::string readme = BELLJAR_README;
  std::ifstream in(readme.substr(0, readme.rfind('/')) + "/docs/security.md");
  REQUIRE(in);
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("| `", 0) == 0) rows.push_back(line);
  for (const auto& entry : syscall_table()) {
    INFO(entry.name);
    std::string cell = std::string("`") + entry.name + "`";
    const std::string* row = nullptr;
    for (const auto& line : rows)
      if (line.find(cell) != std::string::npos && line.find(entry.reason) != std::string::npos)
        row = &line;
    REQUIRE(row != nullptr);
    CHECK(row->find(std::string("| ") + class_name(entry.kind)) != std::string::npos);
  }
}
