// belljar: the command line. Every failure at this edge is one line and exit status 2
// (bad usage) or 1 (the sandbox can't be had); the kernel itself never dies of a request.
#include <cstdio>
#include <iostream>

#include "kernel/command_line.hpp"
#include "kernel/connection_file.hpp"
#include "kernel/jupyter_frontend.hpp"
#include "kernel/kernel.hpp"
#include "kernel/kernelspec.hpp"
#include "kernel/resources.hpp"
#include "sandbox/host_check.hpp"
#include "sandbox/jail_entry.hpp"

using namespace belljar;

namespace {

int run_kernel(const CommandLine& cl) {
  ConnectionInfo connection = read_connection_file(cl.connection_file);
  KernelOptions options;
  options.policy = cl.policy.build();
  options.launch = {options.policy.python, worker_package_dir()};
  options.session_id = new_uuid();
  Kernel kernel(options);  // before the frontend: its ZMQ threads must inherit the signal mask
  JupyterFrontend frontend(connection, options.session_id);
  connection.key.assign(connection.key.size(), '\0');
  return kernel.run(frontend);
}

// `belljar check`: what this host offers and what the policy would use; 0 only if enforceable.
int run_check(const CommandLine& cl) {
  Policy policy = cl.policy.build();
  const LayerReport& host = host_layers();
  EnforcementPlan plan = plan_enforcement(policy, host);
  std::cout << describe_check(host, plan);
  return plan.enforceable ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == kJailCommand) return jail_main(argc, argv);
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    CommandLine cl = parse_command_line(args);
    if (cl.command == "help") {
      std::cout << usage_text();
      return 0;
    }
    if (cl.command == "version") {
      std::cout << "belljar " BELLJAR_VERSION "\n";
      return 0;
    }
    if (cl.command == "kernel") return run_kernel(cl);
    if (cl.command == "check") return run_check(cl);
    if (cl.command == "install") {
      auto dir = install_kernelspec(cl);
      std::cout << "installed kernelspec " << cl.name << " in " << dir.string() << "\n";
      return 0;
    }
    std::cerr << "belljar " << cl.command << ": not available in this build yet\n";
    return 2;
  } catch (const UsageError& e) {
    std::cerr << "belljar: " << e.what() << "\n";
    return 2;
  } catch (const SandboxError& e) {
    std::cerr << "belljar: refusing to start: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "belljar: " << e.what() << "\n";
    return 1;
  }
}
