// The workspace's rule, as components: ordinary names pass, a dot-path or an environment's
// folder anywhere on the way is closed, --protect closes what it names, --writable opens a path
// and lets the folders above it be made.
#include "sandbox/layers/workspace_rule.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "sandbox/layers/host_modules.hpp"
#include "sandbox/layers/workspace_guard.hpp"
#include "sandbox/os/fd.hpp"
#include "sandbox/os/path_parts.hpp"
#include "sandbox_harness.hpp"

using namespace belljar;

namespace {

bool refused(const WorkspaceRule& rule, const std::string& path,
             NameChange change = NameChange::other) {
  return rule.refusal(path_components(path), change).has_value();
}

}  // namespace

TEST_CASE("ordinary files and folders are the sandbox's to change", "[workspace_rule]") {
  WorkspaceRule rule;
  for (const char* path : {"data.csv", "proj/out/figure.png", "a/b/c/d.txt", "notes..txt", "x.git",
                           "venv/lib/python3.11/thing.py"})
    CHECK_FALSE(refused(rule, path));
}

// The fifth outside pass: data/config, data/objects/, data/refs/ and then data/HEAD made data a
// repository the host's git found from data/raw and obeyed (its fsmonitor ran). HEAD completes
// every shape git takes for a repository, so it is the name closed, at any depth.
TEST_CASE("node's packages are closed wherever they are", "[workspace_rule]") {
  WorkspaceRule rule;
  for (const char* path : {"node_modules", "node_modules/jest/lib/run.js", "web/node_modules/x"})
    CHECK(refused(rule, path));
  CHECK(rule.refusal(path_components("app/node_modules/a.js"), NameChange::other)->find("node") !=
        std::string::npos);
  for (const char* path : {"node_modules.txt", "my_node_modules/x.js", "web/src/index.js"})
    CHECK_FALSE(refused(rule, path));
}

TEST_CASE("no name HEAD: a folder is never made a git repository", "[workspace_rule]") {
  WorkspaceRule rule;
  for (const char* path : {"HEAD", "data/HEAD", "a/b/HEAD"}) CHECK(refused(rule, path));
  // git's own spelling alone: `head` is a dataset's folder or a model's layer.
  for (const char* path : {"HEADER.txt", "data/heads", "refs/heads/main", "objects/ab/cd", "ahead",
                           "ckpt/head/variables", "data/Head"})
    CHECK_FALSE(refused(rule, path));
}

// The outside red team's third pass: a file below 130 folders was masked by the quota's survey
// and never counted (301 MiB under a 32M quota). No name is made deeper than the survey reads.
TEST_CASE("nothing deeper than the quota's survey reads is the sandbox's", "[workspace_rule]") {
  WorkspaceRule rule({}, {"deep"});
  auto nested = [](size_t depth) {
    std::string path = "a";
    for (size_t i = 1; i < depth; ++i) path += "/a";
    return path;
  };
  CHECK_FALSE(refused(rule, nested(kMaxDepth - 1), NameChange::make_folder));
  CHECK_FALSE(refused(rule, nested(kMaxDepth - 1)));
  CHECK(refused(rule, nested(kMaxDepth), NameChange::make_folder));
  CHECK(refused(rule, nested(kMaxDepth)));
  CHECK(refused(rule, nested(kMaxDepth + 5)));
  // Whatever --writable opens: the survey masks it all the same.
  CHECK(refused(rule, "deep/" + nested(kMaxDepth - 1), NameChange::make_folder));
}

TEST_CASE("a dot-path anywhere on the way is closed", "[workspace_rule]") {
  WorkspaceRule rule;
  for (const char* path :
       {".gitconfig", ".local/bin/ls", ".config/autostart/x.desktop", "proj/.git/hooks/pre-commit",
        ".ipython/profile_default/startup/a.py", ".jupyter/custom/custom.js", "deep/a/.envrc"})
    CHECK(refused(rule, path));
  CHECK(*rule.refusal({".bashrc"}, NameChange::other) == "a dot-path, which host tools read");
}

TEST_CASE("a Python environment's packages are closed", "[workspace_rule]") {
  WorkspaceRule rule;
  CHECK(refused(rule, "lib/python3.11/site-packages/evil.pth"));
  CHECK(refused(rule, "venv/lib/python3/dist-packages"));
  CHECK(*rule.refusal({"site-packages"}, NameChange::make_folder) == "inside a Python environment");
}

TEST_CASE("a protect pattern closes what it names, at any depth it allows", "[workspace_rule]") {
  WorkspaceRule rule({"tools/deploy.sh", "/Makefile", "*.service"}, {});
  CHECK(refused(rule, "tools/deploy.sh"));
  CHECK(refused(rule, "sub/tools/deploy.sh"));
  CHECK(refused(rule, "Makefile"));
  CHECK_FALSE(refused(rule, "sub/Makefile"));       // anchored at the root
  CHECK(refused(rule, "units/web.service/notes"));  // below a protected path
  CHECK_FALSE(refused(rule, "tools/other.sh"));
  CHECK(*rule.refusal(path_components("tools/deploy.sh"), NameChange::other) == "protected");
}

TEST_CASE("a writable pattern opens a path, and the folders above it may be made",
          "[workspace_rule]") {
  WorkspaceRule rule({}, {".cache/myproject", ".git"});
  CHECK_FALSE(refused(rule, ".cache/myproject"));
  CHECK_FALSE(refused(rule, ".cache/myproject/deep/file.bin"));
  CHECK_FALSE(refused(rule, ".git/hooks/pre-commit"));
  CHECK_FALSE(refused(rule, ".cache", NameChange::make_folder));
  CHECK(refused(rule, ".cache"));  // a file named .cache is no folder above the pattern
  CHECK(refused(rule, ".cache/other", NameChange::make_folder));
  CHECK(refused(rule, ".config/x"));
  // --protect still wins inside an opened path
  CHECK(refused(WorkspaceRule({".git/hooks"}, {".git"}), ".git/hooks/pre-commit"));
}

TEST_CASE("the workspace itself is not the sandbox's to change", "[workspace_rule]") {
  CHECK(refused(WorkspaceRule{}, ""));
}

TEST_CASE("conda's activation folders are closed wherever they are", "[workspace_rule]") {
  WorkspaceRule rule;
  CHECK(refused(rule, "envs/ml/etc/conda/activate.d/evil.sh"));
  CHECK(refused(rule, "etc/conda/deactivate.d/x.sh"));
  CHECK(refused(rule, "envs/ml/etc/conda/activate.d", NameChange::make_folder));
  // near misses stay the project's
  CHECK_FALSE(refused(rule, "etc/conda/environment.yml"));
  CHECK_FALSE(refused(rule, "notes/activate.d/readme.txt"));
  CHECK_FALSE(refused(rule, "conda/activate.d/x.sh"));
  CHECK_FALSE(refused(rule, "lib/helpers.py"));
}

namespace {

// A folder of `paths` (a trailing "/": a folder), as an O_PATH descriptor the broker would
// hold, asked whether it is an environment's root.
bool environment_root(const std::vector<std::string>& paths) {
  belljar::testing::TempDir dir("belljar-env-shape");
  for (const auto& path : paths) {
    std::filesystem::path full = dir.path / path;
    if (path.back() == '/') {
      std::filesystem::create_directories(full);
    } else {
      std::filesystem::create_directories(full.parent_path());
      std::ofstream(full) << "x";
    }
  }
  Fd held(::open(dir.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(held);
  return holds_python_environment(held.get());
}

}  // namespace

TEST_CASE("a Python environment is recognised by its shape", "[workspace_rule]") {
  CHECK(environment_root({"pyvenv.cfg"}));
  CHECK(environment_root({"conda-meta/", "bin/python3.11", "lib/python3.11/"}));
  CHECK(environment_root({"conda-meta/history"}));                 // conda, no interpreter yet
  CHECK(environment_root({"bin/python3.12", "lib/python3.12/"}));  // a prefix with no marker
  CHECK(environment_root({"bin/python", "lib/python3.9/site-packages/"}));
  // near misses: an ordinary project's bin and lib, a conda-meta that is no folder
  CHECK_FALSE(environment_root({"lib/helpers.py", "bin/run.sh"}));
  CHECK_FALSE(environment_root({"lib/python3.11/", "bin/tool"}));
  CHECK_FALSE(environment_root({"bin/python3", "lib/libfoo.so"}));
  CHECK_FALSE(environment_root({"bin/python3", "lib/python3.11"}));  // a file, not a folder
  CHECK_FALSE(environment_root({"conda-meta.txt", "src/main.py"}));
  CHECK_FALSE(environment_root({"lib/", "bin/"}));
  CHECK_FALSE(environment_root({}));
}

TEST_CASE("the environment table names every shape once, with its reason", "[workspace_rule]") {
  std::string shapes;
  for (const auto& shape : python_environment_shapes()) {
    CHECK(std::string(shape.reason).size() > 20);
    shapes += shape.shape;
  }
  for (const char* marker :
       {"pyvenv.cfg", "conda-meta", "bin/python*", "lib/python3.*", "site-packages",
        "dist-packages", "etc/conda/activate.d", "node_modules"})
    CHECK(shapes.find(marker) != std::string::npos);
}

TEST_CASE("docs/security.md shows the environment table", "[workspace_rule]") {
  std::string readme = BELLJAR_README;
  std::ifstream in(readme.substr(0, readme.rfind('/')) + "/docs/security.md");
  REQUIRE(in);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& shape : python_environment_shapes()) {
    INFO(shape.shape);
    CHECK(text.find(std::string("\n| ") + shape.shape + " | ") != std::string::npos);
    CHECK(text.find(std::string(" | ") + shape.reason + " |\n") != std::string::npos);
  }
}

// The outside attack on round three: `ipykernel_launcher.py` in a notebook's folder ran as the
// host user when a stock ipykernel started there (JupyterLab starts it with that folder as its
// working directory, first on sys.path); `readline.py` did the same for `python -i`, `pip.py`
// for `python -m pip`.
TEST_CASE("a module of the host's Python by name is closed at any depth", "[workspace_rule]") {
  WorkspaceRule rule;
  for (const char* path :
       {"ipykernel_launcher.py", "readline.py", "pip.py", "course/week1/zmq.py", "json.pyc",
        "traitlets.cpython-311-x86_64-linux-gnu.so", "tornado.abi3.so", "runpy.py", "orjson.py",
        "_sysconfigdata__x86_64-linux-gnu.py", "json/__init__.py", "a/zmq/__init__.cpython-311.so",
        "IPython/__init__.pyc"})
    CHECK(refused(rule, path));
  // A bare name may be a link to a package, or a package renamed into place; a new folder is
  // only a namespace portion, which yields to the real module, until its __init__ is made.
  CHECK(refused(rule, "zmq"));
  CHECK(refused(rule, "notebooks/json", NameChange::other));
  CHECK_FALSE(refused(rule, "notebooks/json", NameChange::make_folder));
  // An optional import the host lacks: the plain folder would be the package (the outside
  // attack on round three: numpydoc/docscrape.py ran when jedi completed in a stock kernel).
  for (const char* folder : {"numpydoc", "orjson", "django", "matplotlib", "distutils", "tkinter"})
    CHECK(refused(rule, std::string("course/") + folder, NameChange::make_folder));
  CHECK_FALSE(refused(rule, "json/data.py"));
  CHECK_FALSE(refused(rule, "json/week1/__init__.py"));
}

TEST_CASE("a course's own module names stay the sandbox's", "[workspace_rule]") {
  WorkspaceRule rule;
  for (const char* path : {"helpers.py", "solution.py", "test_solution.py", "utils/__init__.py",
                           "grading_helpers.py", "ipykernel_notes.txt", "json.txt", "random.csv",
                           "pip.py.bak", "notes/zmq.md", "mypkg/__init__.py", "data/json.py.orig"})
    CHECK_FALSE(refused(rule, path));
}

TEST_CASE("a module's name is what Python would import the entry as", "[workspace_rule]") {
  for (auto name : {"code", "json", "html", "email", "logging", "xml"}) {
    CHECK(host_module_name(name));
    CHECK(plain_folder_harmless(name));
  }
  CHECK(module_of("zmq.py") == "zmq");
  CHECK(module_of("zmq.pyc") == "zmq");
  CHECK(module_of("zmq.cpython-311-x86_64-linux-gnu.so") == "zmq");
  CHECK(module_of("zmq") == "zmq");
  CHECK(module_of("zmq.pyx").empty());
  CHECK(module_of("zmq.py.bak").empty());
  CHECK(module_of(".zmq.py").empty());
  CHECK(host_module_name("ipykernel_launcher"));
  CHECK(host_module_name("_sysconfigdata__linux_x86_64-linux-gnu"));
  CHECK_FALSE(host_module_name("helpers"));
  CHECK_FALSE(host_module_name("zmq.py"));
}

// The outside attack on the third pass's fix: a file written after its last name went was
// counted by no survey. The morgue is closed to every change, --writable or not.
TEST_CASE("the morgue is closed to the sandbox, whatever --writable opens", "[workspace_rule]") {
  WorkspaceRule rule({}, {kMorgueName, ".*", "*"});
  for (const char* path : {".belljar-morgue", ".belljar-morgue/1-2", ".belljar-morgue/x/y"})
    for (auto change : {NameChange::make_folder, NameChange::other})
      CHECK(refused(rule, path, change));
  CHECK_FALSE(refused(rule, "sub/.belljar-morgue"));  // opened there: only the top one is it
  CHECK_FALSE(refused(rule, ".belljar-morgue2"));
}

// Every removal, by shape: only a regular file's last name asks the lease, and only a grant
// removes it; every other answer (EAGAIN held, EINVAL leases disabled, EACCES not the owner,
// EWOULDBLOCK another's lease, ESTALE changed meanwhile) keeps it counted in the morgue.
TEST_CASE("a last name goes only when the lease says nobody holds the file", "[workspace_rule]") {
  const unsigned others[] = {S_IFDIR | 0755,  S_IFLNK | 0777, S_IFIFO | 0644,
                             S_IFSOCK | 0755, S_IFCHR | 0644, S_IFBLK | 0644};
  for (unsigned mode : others) {
    CHECK_FALSE(needs_lease(mode, 1));
    CHECK(removal_of(mode, 1, EAGAIN) == Removal::remove);
  }
  for (unsigned long links : {2UL, 3UL, 65000UL}) {
    CHECK_FALSE(needs_lease(S_IFREG | 0644, links));
    CHECK(removal_of(S_IFREG | 0644, links, EAGAIN) == Removal::remove);
  }
  CHECK(needs_lease(S_IFREG | 0644, 1));
  CHECK(removal_of(S_IFREG | 0644, 1, 0) == Removal::remove);
  for (int lease : {EAGAIN, EBUSY, EINVAL, EACCES, EPERM, EWOULDBLOCK, ESTALE, ENOENT, ENOLCK})
    CHECK(removal_of(S_IFREG | 0000, 1, lease) == Removal::morgue);
  // The table the docs show names both outcomes and a reason for each row.
  size_t morgue = 0;
  for (const auto& row : removal_cases()) {
    CHECK(std::string(row.reason).size() > 10);
    morgue += row.removal == Removal::morgue;
  }
  CHECK(morgue == 2);
}

TEST_CASE("docs/security.md shows the removal table", "[workspace_rule]") {
  std::string readme = BELLJAR_README;
  std::ifstream in(readme.substr(0, readme.rfind('/')) + "/docs/security.md");
  REQUIRE(in);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& row : removal_cases()) {
    INFO(row.what);
    std::string outcome = row.removal == Removal::remove ? "removed" : "moved to the morgue";
    CHECK(text.find(std::string("\n| ") + row.what + " | " + outcome + " | " + row.reason +
                    " |\n") != std::string::npos);
  }
}

// The outside attack on the third pass's fix: 2,060 top-level folders, each holding what the
// survey masks, made every later start refuse (more than kMaxGuards guarded top-level entries).
// A secret's name is closed to the sandbox, whatever --writable says; its near misses are not.
TEST_CASE("a secret's name is the sandbox's to make nowhere", "[workspace_rule]") {
  WorkspaceRule rule({}, {"*", "*.pem"},
                     {"*.pem", "*.key", "id_rsa*", "jupyter/runtime", "/data/private"});
  for (const char* path : {"k.pem", "t0001/k.pem", "a/b/server.key", "id_rsa.pub", "x/id_rsa",
                           "home/jupyter/runtime", "home/jupyter/runtime/kernel-1.json",
                           "jupyter/runtime", "data/private", "data/private/x.csv"})
    for (auto change : {NameChange::make_folder, NameChange::other}) {
      INFO(path);
      CHECK(refused(rule, path, change));
    }
  for (const char* path : {"k.pem.txt", "pem", "keys/readme", "jupyter/config", "runtime",
                           "sub/data/private", "my_id_rsa"}) {
    INFO(path);
    CHECK_FALSE(refused(rule, path));
  }
}

// The outside attack on round three: a session's own pyvenv.cfg at the workspace's top closed
// the workspace to it and every later session.
TEST_CASE("a name that completes an environment's shape is known before it is made",
          "[workspace_rule]") {
  belljar::testing::TempDir dir("belljar-env-complete");
  std::filesystem::create_directories(dir.path / "p" / "lib" / "python3.11");
  std::filesystem::create_directories(dir.path / "q" / "bin");
  std::ofstream(dir.path / "q" / "bin" / "python3") << "";
  Fd p(::open((dir.path / "p").c_str(), O_PATH | O_DIRECTORY));
  Fd q(::open((dir.path / "q").c_str(), O_PATH | O_DIRECTORY));
  CHECK(completes_environment("", "pyvenv.cfg", -1));
  CHECK(completes_environment("anything", "conda-meta", -1));
  CHECK(completes_environment("bin", "python3", p.get()));
  CHECK(completes_environment("lib", "python3.12", q.get()));
  // Near misses: a project's bin and lib, each without the other half.
  CHECK_FALSE(completes_environment("bin", "python3", q.get()));
  CHECK_FALSE(completes_environment("lib", "python3.12", p.get()));
  CHECK_FALSE(completes_environment("bin", "run.sh", p.get()));
  CHECK_FALSE(completes_environment("lib", "helpers", q.get()));
  CHECK_FALSE(completes_environment("", "pyvenv.cfg.txt", -1));
}
