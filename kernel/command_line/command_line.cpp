#include "kernel/command_line/command_line.hpp"

#include <sstream>

namespace belljar {

namespace {
const std::vector<std::string> kCommands = {"kernel", "install", "run", "mcp", "check"};

std::string value_of(const std::vector<std::string>& args, size_t& i, const std::string& flag) {
  if (i + 1 >= args.size()) throw UsageError(flag + ": missing value");
  return args[++i];
}
}  // namespace

CommandLine parse_command_line(const std::vector<std::string>& args) {
  CommandLine cl;
  if (args.empty()) throw UsageError("missing command (try belljar --help)");
  const std::string& first = args[0];
  // Hidden: `belljar help --flags-markdown` prints the README's policy flag table.
  if (first == "help" && args.size() == 2 && args[1] == "--flags-markdown")
    return cl.command = "flags-markdown", cl;
  if (first == "--help" || first == "-h" || first == "help") return cl.command = "help", cl;
  if (first == "--version" || first == "-V") return cl.command = "version", cl;
  bool known = false;
  for (auto& c : kCommands) known = known || c == first;
  if (!known) throw UsageError("unknown command " + first + " (try belljar --help)");
  cl.command = first;

  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      cl.command = "help";
      return cl;
    }
    if (int used = cl.policy.take(args, i)) {
      i += static_cast<size_t>(used) - 1;
      continue;
    }
    if (cl.command == "kernel" && (arg == "-f" || arg == "--connection-file")) {
      cl.connection_file = value_of(args, i, arg);
    } else if (cl.command == "kernel" && arg.rfind("--connection-file=", 0) == 0) {
      cl.connection_file = arg.substr(18);
    } else if (cl.command == "install" && arg == "--user") {
      cl.scope = CommandLine::Scope::user;
    } else if (cl.command == "install" && arg == "--sys-prefix") {
      cl.scope = CommandLine::Scope::sys_prefix;
    } else if (cl.command == "install" && arg == "--prefix") {
      cl.scope = CommandLine::Scope::prefix;
      cl.prefix = value_of(args, i, arg);
    } else if (cl.command == "install" && arg == "--name") {
      cl.name = value_of(args, i, arg);
      if (cl.name.empty() ||
          cl.name.find_first_not_of(
              "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
              std::string::npos)
        throw UsageError("--name " + cl.name + ": use letters, digits, '-', '_' and '.'");
    } else if (cl.command == "install" && arg == "--display-name") {
      cl.display_name = value_of(args, i, arg);
    } else if (cl.command == "run" && arg == "-c") {
      if (cl.run_file || cl.run_code)
        throw UsageError("belljar run takes one of FILE.py, -c CODE or -");
      cl.run_code = value_of(args, i, arg);
    } else if (cl.command == "run" && arg == "--json") {
      cl.json_output = true;
    } else if (cl.command == "run" && (arg == "-" || arg[0] != '-')) {
      if (cl.run_file || cl.run_code)
        throw UsageError("belljar run takes one of FILE.py, -c CODE or -");
      cl.run_file = arg;
    } else {
      throw UsageError("unknown option " + arg + " for belljar " + cl.command);
    }
  }
  if (cl.command == "kernel" && cl.connection_file.empty())
    throw UsageError("belljar kernel needs -f CONNECTION_FILE");
  if (cl.command == "run" && !cl.run_file && !cl.run_code)
    throw UsageError("belljar run needs FILE.py, -c CODE or - (standard input)");
  return cl;
}

std::string usage_text() {
  std::ostringstream out;
  out << "belljar " BELLJAR_VERSION
         " — a Jupyter kernel whose Python session lives in a sandbox\n\n"
      << "usage:\n"
      << "  belljar kernel -f CONNECTION_FILE [policy flags]   what kernel.json runs\n"
      << "  belljar install [--user | --sys-prefix | --prefix DIR] [--name NAME]\n"
      << "                  [--display-name TEXT] [policy flags]\n"
      << "  belljar run [policy flags] [--json] (FILE.py | -c CODE | -)\n"
      << "  belljar mcp [policy flags]                          MCP server on stdio\n"
      << "  belljar check [policy flags]                        what this host can enforce\n"
      << "  belljar --help | --version\n\n"
      << "policy flags (later sources win: defaults < --policy FILE < flags):\n";
  for (auto& [flag, meaning] : policy_flag_help()) {
    out << "  " << flag << "  ";
    for (size_t pad = flag.size(); pad < 24; ++pad) out << ' ';
    out << meaning << "\n";
  }
  return out.str();
}

}  // namespace belljar
