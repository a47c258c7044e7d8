// The environment the kernel reads, against its sources: every getenv and environ read in
// kernel/ and sandbox/ is in environment_reads()'s table, every row of the table is read where
// it says, and no variable but the pod's policy flags may change the policy.
#include "sandbox/policy/environment_reads.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

using namespace belljar;
namespace fs = std::filesystem;

namespace {

// A source file's text without its comments (a comment may name os.environ or getenv).
std::string code_of(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string source = text.str(), code;
  bool in_string = false;
  for (size_t i = 0; i < source.size(); ++i) {
    char c = source[i];
    if (in_string) {
      code += c;
      if (c == '\\' && i + 1 < source.size())
        code += source[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '\'') {  // a character literal: '"' opens no string
      size_t end = source.find('\'', i + 1 + (source[i + 1] == '\\' ? 1 : 0));
      if (end == std::string::npos) end = source.size() - 1;
      code += source.substr(i, end - i + 1);
      i = end;
    } else if (c == '"') {
      in_string = true;
      code += c;
    } else if (source.compare(i, 2, "//") == 0) {
      while (i < source.size() && source[i] != '\n') ++i;
      code += '\n';
    } else if (source.compare(i, 2, "/*") == 0) {
      size_t end = source.find("*/", i + 2);
      i = end == std::string::npos ? source.size() : end + 1;
    } else {
      code += c;
    }
  }
  return code;
}

struct Reads {
  std::set<std::string> names;  // getenv("NAME"), and the names a gateway lookup lists
  bool whole = false;           // environ, or getenv of a name not spelled here
};

// Every C++ file of the kernel and the jail helper, by its path from the root.
std::map<std::string, Reads> reads_in_sources() {
  const fs::path root = BELLJAR_SOURCE_DIR;
  const std::regex literal(R"re(getenv\s*\(\s*"([^"]*)"\s*\))re");
  const std::regex any_call(R"re(getenv\s*\()re");
  const std::regex whole(R"re(\benviron\b)re");
  // kernel/launch/gateway_launch.cpp: flag_or_env(flag, {"NAME", ...}, getenv)
  const std::regex lookup(R"re(flag_or_env\s*\([^;{]*\{([^}]*)\})re");
  const std::regex quoted(R"re("([^"]*)")re");
  std::map<std::string, Reads> found;
  for (const char* top : {"kernel", "sandbox"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() ||
          (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".c"))
        continue;
      std::string code = code_of(entry.path());
      std::string rel = fs::relative(entry.path(), root).string();
      Reads reads;
      size_t literal_calls = 0, calls = 0;
      for (std::sregex_iterator it(code.begin(), code.end(), literal), end; it != end; ++it) {
        reads.names.insert((*it)[1].str());
        ++literal_calls;
      }
      for (std::sregex_iterator it(code.begin(), code.end(), any_call), end; it != end; ++it)
        ++calls;
      for (std::sregex_iterator it(code.begin(), code.end(), lookup), end; it != end; ++it) {
        std::string names = (*it)[1].str();
        for (std::sregex_iterator q(names.begin(), names.end(), quoted), qend; q != qend; ++q)
          reads.names.insert((*q)[1].str());
      }
      reads.whole = calls > literal_calls || std::regex_search(code, whole);
      if (!reads.names.empty() || reads.whole) found[rel] = reads;
    }
  }
  return found;
}

}  // namespace

TEST_CASE("every environment read in the kernel's sources is in the table, and only those",
          "[policy][environment]") {
  auto found = reads_in_sources();
  REQUIRE(found.size() >= 5);  // the scan sees the reads it is meant to (a wrong root sees none)
  std::set<std::pair<std::string, std::string>> table;
  for (const auto& read : environment_reads())
    table.insert({std::string(read.reader), std::string(read.name)});
  for (const auto& [file, reads] : found) {
    INFO(file << ": add the read to sandbox/policy/environment_reads.cpp (and docs/security.md) "
                 "with what it may change, or make it a policy flag");
    for (const auto& name : reads.names) {
      INFO(name);
      CHECK(table.count({file, name}) == 1);
    }
    if (reads.whole) CHECK(table.count({file, "*"}) == 1);
  }
  // And the table holds nothing the sources do not read.
  for (const auto& read : environment_reads()) {
    INFO(read.reader << " " << read.name);
    auto it = found.find(std::string(read.reader));
    REQUIRE(it != found.end());
    if (read.name == "*")
      CHECK(it->second.whole);
    else
      CHECK(it->second.names.count(std::string(read.name)) == 1);
    CHECK_FALSE(read.changes.empty());
  }
}

TEST_CASE("no environment variable switches a layer off or changes the policy",
          "[policy][environment]") {
  // The one exception, stated: a pod's policy flags, which `belljar launch` reads from the env
  // install --kubernetes writes into the kernelspec (the command line's own win).
  for (const auto& read : environment_reads()) {
    INFO(read.name);
    CHECK(read.policy == (read.name == "BELLJAR_POLICY_FLAGS"));
    // Finding 11 of issue 39: BELLJAR_BENCH_WORKSPACE_BROKER_OFF turned the broker off. Besides
    // the pod's flags, one more of belljar's own names is read: the MCP HTTP server's bearer
    // token, a credential that switches nothing (without it one is generated).
    if (read.name.rfind("BELLJAR_", 0) == 0)
      CHECK((read.name == "BELLJAR_POLICY_FLAGS" || read.name == "BELLJAR_MCP_TOKEN"));
  }
  auto found = reads_in_sources();
  for (const auto& [file, reads] : found) {
    // The jail helper's sources read nothing: it is exec'd with an empty environment.
    INFO(file);
    CHECK_FALSE((file.rfind("sandbox/jail/", 0) == 0 || file.rfind("sandbox/layers/", 0) == 0 ||
                 file.rfind("sandbox/os/", 0) == 0 ||
                 file.rfind("sandbox/jail_protocol/", 0) == 0));
  }
}

// The outside attack on round three: OpenSSL read SSL_CERT_FILE and SSL_CERT_DIR for the egress
// proxy's upstream trust (whom a --secret is sent to) and OPENSSL_CONF for its configuration.
// No source calls a library function that reads the environment on our behalf.
TEST_CASE("no source asks a library to read the environment for it", "[policy][environment]") {
  const fs::path root = BELLJAR_SOURCE_DIR;
  const std::regex reads_environment(
      R"re(\b(SSL_CTX_set_default_verify_paths|X509_STORE_set_default_paths|X509_get_default_cert_(file|dir)_env|OPENSSL_config|CONF_modules_load\w*|OPENSSL_INIT_LOAD_CONFIG)\b)re");
  size_t sources = 0;
  for (const char* top : {"kernel", "sandbox"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
      ++sources;
      std::string code = code_of(entry.path());
      INFO(fs::relative(entry.path(), root).string());
      CHECK_FALSE(std::regex_search(code, reads_environment));
    }
  }
  CHECK(sources > 100);
}
