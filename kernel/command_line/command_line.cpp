#include "kernel/command_line/command_line.hpp"

#include <cstdlib>
#include <sstream>

#include "kernel/mcp_http/http_rules.hpp"

namespace belljar {

namespace {
const std::vector<std::string> kCommands = {"kernel", "install", "run", "mcp", "check", "launch"};

std::string value_of(const std::vector<std::string>& args, size_t& i, const std::string& flag) {
  if (i + 1 >= args.size()) throw UsageError(flag + ": missing value");
  return args[++i];
}
// `belljar launch`'s own flags, in the gateways' spellings: the launchers they ship take
// --kernel-id and the older --RemoteProcessProxy.kernel-id alike, as `--flag VALUE` or
// `--flag=VALUE`. Returns how many arguments it used (0: not one of these).
int take_launch_flag(const std::vector<std::string>& args, size_t i, GatewayLaunchArgs& launch) {
  struct Flag {
    const char* name;
    std::optional<std::string>* slot;
  };
  std::optional<std::string> ignored;
  const Flag flags[] = {{"kernel-id", &launch.kernel_id},
                        {"port-range", &launch.port_range},
                        {"response-address", &launch.response_address},
                        {"public-key", &launch.public_key},
                        {"ip", nullptr},
                        // Spark and ipykernel's class are the gateways' other kernels' business.
                        {"spark-context-initialization-mode", &ignored},
                        {"cluster-type", &ignored},
                        {"kernel-class-name", &ignored}};
  std::string arg = args[i];
  if (arg.rfind("--RemoteProcessProxy.", 0) == 0) arg = "--" + arg.substr(21);
  for (const Flag& flag : flags) {
    std::string name = std::string("--") + flag.name;
    std::string value;
    int used = 0;
    if (arg == name) {
      if (i + 1 >= args.size()) throw UsageError(name + ": missing value");
      value = args[i + 1], used = 2;
    } else if (arg.rfind(name + "=", 0) == 0) {
      value = arg.substr(name.size() + 1), used = 1;
    } else {
      continue;
    }
    if (!flag.slot)
      launch.ip = value;
    else if (flag.slot != &ignored)
      *flag.slot = value;
    else if (name == "--spark-context-initialization-mode" && value != "none")
      throw UsageError(name + " " + value + ": belljar runs no Spark context (use none)");
    return used;
  }
  return 0;
}
// `belljar mcp`'s own flags (the policy flags are taken before): false for any other.
bool take_mcp_flag(CommandLine& cl, const std::vector<std::string>& args, size_t& i) {
  const std::string& arg = args[i];
  if (arg == "--max-sessions") {
    std::string value = value_of(args, i, arg);
    size_t n = 0;
    if (value.empty() || value.size() > 4 ||
        value.find_first_not_of("0123456789") != std::string::npos || (n = std::stoul(value)) < 1 ||
        n > 1024)
      throw UsageError("--max-sessions " + value + ": a whole number from 1 to 1024");
    cl.max_sessions = n;
  } else if (arg == "--idle-timeout") {
    std::string value = value_of(args, i, arg);
    char* end = nullptr;
    double seconds = value.empty() ? -1 : std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(seconds >= 0) || seconds > 7 * 86400)
      throw UsageError("--idle-timeout " + value + ": seconds from 0 (never) to 604800 (a week)");
    cl.idle_timeout_seconds = seconds;
  } else if (arg == "--session-folders") {
    cl.session_folders = true;
  } else if (arg == "--http") {
    std::string value = value_of(args, i, arg);
    std::string why;
    if (!parse_http_address(value, &why)) throw UsageError("--http " + value + ": " + why);
    cl.http = value;
  } else if (arg == "--http-host") {
    std::string value = value_of(args, i, arg);
    std::string why;
    std::optional<std::string> name = parse_http_host(value, &why);
    if (!name) throw UsageError("--http-host " + value + ": " + why);
    cl.http_hosts.push_back(*name);
  } else if (arg == "--one-session") {
    std::string id = value_of(args, i, arg);
    if (id.size() != 36 || id.find_first_not_of("0123456789abcdef-") != std::string::npos)
      throw UsageError("--one-session " + id + ": the router's kernel id (a uuid)");
    cl.one_session = id;
  } else {
    return false;
  }
  return true;
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
    if (cl.command == "launch") {
      if (int used = take_launch_flag(args, i, cl.launch)) {
        i += static_cast<size_t>(used) - 1;
        continue;
      }
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
    } else if (cl.command == "install" && arg == "--kubernetes") {
      cl.kubernetes_image = value_of(args, i, arg);
      if (cl.kubernetes_image->empty() ||
          cl.kubernetes_image->find_first_of(" \t\n\"'{}") != std::string::npos)
        throw UsageError("--kubernetes " + *cl.kubernetes_image + ": not an image name");
    } else if (cl.command == "install" && arg == "--gateway") {
      std::string gateway = value_of(args, i, arg);
      if (gateway == "enterprise-gateway")
        cl.gateway = CommandLine::Gateway::enterprise_gateway;
      else if (gateway == "gateway-provisioners")
        cl.gateway = CommandLine::Gateway::gateway_provisioners;
      else
        throw UsageError("--gateway " + gateway +
                         ": expected enterprise-gateway or gateway-provisioners");
    } else if (cl.command == "install" && arg == "--launcher-scripts") {
      cl.launcher_scripts = value_of(args, i, arg);
    } else if (cl.command == "kernel" && arg.starts_with("--HistoryManager.hist_file=")) {
      // jupyter_client takes a kernelspec named python3 for ipykernel, and nbclient then adds
      // ipykernel's option for an in-memory history file. belljar's history is the
      // supervisor's, in memory, never a file: the option asks for nothing belljar would do.
    } else if (cl.command == "mcp" && take_mcp_flag(cl, args, i)) {
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
  if (!cl.kubernetes_image && (cl.launcher_scripts || cl.gateway))
    throw UsageError("--gateway and --launcher-scripts go with --kubernetes IMAGE");
  if (cl.session_folders && cl.one_session)
    throw UsageError("--one-session is the router's own: --session-folders goes to the router");
  if (!cl.http_hosts.empty() && !cl.http)
    throw UsageError("--http-host names what a proxy forwards to --http HOST:PORT: give both");
  if (cl.http && cl.one_session)
    throw UsageError("--one-session is the router's own: it speaks stdio, never --http");
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
      << "                  [--kubernetes IMAGE [--gateway "
         "enterprise-gateway|gateway-provisioners]\n"
      << "                   [--launcher-scripts DIR]]     a kernelspec whose kernels run in pods\n"
      << "  belljar run [policy flags] [--json] (FILE.py | -c CODE | -)\n"
      << "  belljar mcp [--http HOST:PORT] [--max-sessions N] [--idle-timeout SECONDS]\n"
      << "              [--http-host NAME] [--session-folders] [policy flags]\n"
      << "                                                      MCP server on stdio, or on\n"
      << "                                                      HTTP at /mcp: sessions as\n"
      << "                                                      handles, each its own sandbox\n"
      << "  belljar check [policy flags]                        what this host can enforce\n"
      << "  belljar launch [policy flags] --kernel-id ID --port-range LO..HI\n"
      << "                 --response-address IP:PORT --public-key KEY [--ip ADDR]\n"
      << "                                                      a kernel a gateway launched\n"
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
