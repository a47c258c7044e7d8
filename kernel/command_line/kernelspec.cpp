#include "kernel/command_line/kernelspec.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernel/command_line/resources.hpp"
#include "sandbox/jail_client/python_layout.hpp"
#include "sandbox/jail_client/worker_process.hpp"

namespace belljar {
namespace fs = std::filesystem;

namespace {
fs::path jupyter_data_dir() {
  if (const char* dir = std::getenv("JUPYTER_DATA_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) return fs::path(xdg) / "jupyter";
  const char* home = std::getenv("HOME");
  if (!home || !*home) throw UsageError("--user: HOME is not set");
  return fs::path(home) / ".local/share/jupyter";
}

// The interpreter's sys.prefix, read from its files as CPython's getpath would (a venv's own
// directory, else the installation's prefix): the interpreter is never run on the host.
fs::path python_prefix(const std::string& python) {
  PythonLayout layout;
  try {
    layout = locate_python(python);
  } catch (const SandboxError& e) {
    throw UsageError(std::string("--sys-prefix: ") + e.what());
  }
  if (layout.prefixes.empty())
    throw UsageError("--sys-prefix: no installation prefix found for " + python);
  return layout.prefixes.front();
}
// JupyterLab enables its debugger from the kernelspec alone (metadata.debugger): true when the
// interpreter's packages hold debugpy, read from its files (the interpreter never runs here).
bool python_can_debug(const std::string& python) {
  try {
    return has_site_package(locate_python(python), "debugpy");
  } catch (const SandboxError&) {
    return false;
  }
}

// The gateway's own pod launcher (launch_kubernetes.py and the pod template beside it), run by
// the gateway where it runs: it creates the pod, whose image starts `belljar launch`.
constexpr const char* kPodLauncher = "scripts/launch_kubernetes.py";

// kernel.json for a gateway that starts each kernel in a pod of IMAGE, in the shape the
// gateway's own spec generators write. The policy flags reach the pod through the launcher's
// environment (BELLJAR_POLICY_FLAGS, which `belljar launch` reads): a name without the
// KERNEL_ prefix, which the gateways let clients set, so a client cannot loosen the policy.
nlohmann::json kubernetes_spec(const CommandLine& cl, const fs::path& dir) {
  bool eg = cl.gateway.value_or(CommandLine::Gateway::enterprise_gateway) ==
            CommandLine::Gateway::enterprise_gateway;
  // Enterprise Gateway's shipped specs use the older RemoteProcessProxy spellings, which its
  // launcher still reads; gateway_provisioners' launcher takes only the new ones.
  std::string prefix = eg ? "--RemoteProcessProxy." : "--";
  std::vector<std::string> argv = {"python", (dir / kPodLauncher).string()};
  for (const char* flag : {"kernel-id", "port-range", "response-address", "public-key"}) {
    argv.push_back(prefix + flag);
    std::string placeholder = flag;
    for (char& c : placeholder)
      if (c == '-') c = '_';
    argv.push_back("{" + placeholder + "}");
  }
  nlohmann::json metadata = {
      {"debugger", false},
      {"belljar", {{"version", BELLJAR_VERSION}, {"image", *cl.kubernetes_image}}}};
  if (eg)
    metadata["process_proxy"] = {
        {"class_name", "enterprise_gateway.services.processproxies.k8s.KubernetesProcessProxy"},
        {"config", {{"image_name", *cl.kubernetes_image}}}};
  else
    metadata["kernel_provisioner"] = {
        {"provisioner_name", "kubernetes-provisioner"},
        {"config", {{"image_name", *cl.kubernetes_image}, {"launch_timeout", 30}}}};
  nlohmann::json env = nlohmann::json::object();
  if (!cl.policy.given().empty())
    env["BELLJAR_POLICY_FLAGS"] = nlohmann::json(cl.policy.given()).dump();
  return {{"argv", argv}, {"display_name", cl.display_name}, {"language", "python"},
          {"env", env},   {"interrupt_mode", "signal"},      {"metadata", metadata}};
}

// The gateway's pod launcher, copied from its own Kubernetes kernelspec's scripts/.
void check_launcher_scripts(const fs::path& from) {
  if (!fs::exists(from / "launch_kubernetes.py"))
    throw UsageError("--launcher-scripts " + from.string() +
                     ": no launch_kubernetes.py there (the scripts/ folder of the gateway's own "
                     "Kubernetes kernelspec)");
}

void copy_launcher_scripts(const fs::path& from, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir / "scripts", ec);
  fs::copy(from, dir / "scripts",
           fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  if (ec) throw UsageError("cannot copy " + from.string() + ": " + ec.message());
}
}  // namespace

fs::path install_kernelspec(const CommandLine& cl) {
  // Validates everything before anything is written; a pod's paths are the image's, so a
  // Kubernetes spec's flags are checked one by one as they were read, not resolved here.
  Policy policy = cl.kubernetes_image ? Policy{} : cl.policy.build();
  if (cl.launcher_scripts) check_launcher_scripts(fs::absolute(*cl.launcher_scripts));
  fs::path kernels;
  switch (cl.scope) {
    case CommandLine::Scope::user:
      kernels = jupyter_data_dir() / "kernels";
      break;
    case CommandLine::Scope::sys_prefix:
      kernels = python_prefix(policy.python) / "share/jupyter/kernels";
      break;
    case CommandLine::Scope::prefix:
      kernels = fs::absolute(cl.prefix) / "share/jupyter/kernels";
      break;
    case CommandLine::Scope::default_:
      kernels = ::geteuid() == 0 ? fs::path("/usr/local/share/jupyter/kernels")
                                 : jupyter_data_dir() / "kernels";
  }
  fs::path dir = kernels / cl.name;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UsageError("cannot create " + dir.string() + ": " + ec.message());

  nlohmann::json spec;
  if (cl.kubernetes_image) {
    if (cl.launcher_scripts) copy_launcher_scripts(fs::absolute(*cl.launcher_scripts), dir);
    spec = kubernetes_spec(cl, dir);
  } else {
    std::vector<std::string> argv = {executable_path().string(), "kernel", "-f",
                                     "{connection_file}"};
    // The flags as given, and the defaults install resolves (the python on PATH) so the kernel
    // runs the interpreter the user installed it for.
    for (auto& arg : cl.policy.kernel_argv(policy)) argv.push_back(std::move(arg));
    bool debugger = python_can_debug(policy.python);
    if (!debugger)
      std::fputs(("belljar: JupyterLab's debugger stays off for this kernel: " + policy.python +
                  " has no debugpy among its packages (install it there to turn it on)\n")
                     .c_str(),
                 stderr);
    spec = {{"argv", argv},
            {"display_name", cl.display_name},
            {"language", "python"},
            {"interrupt_mode", "message"},
            {"metadata",
             {{"debugger", debugger},
              {"belljar",
               {{"version", BELLJAR_VERSION}, {"isolation", isolation_name(policy.isolation)}}}}}};
  }
  std::ofstream out(dir / "kernel.json");
  out << spec.dump(2) << "\n";
  if (!out) throw UsageError("cannot write " + (dir / "kernel.json").string());
  if (cl.kubernetes_image && !fs::exists(dir / kPodLauncher))
    std::fputs(("belljar: " + (dir / kPodLauncher).string() +
                " is not there yet: copy the scripts/ folder of your gateway's own Kubernetes "
                "kernelspec into " +
                dir.string() + " (or pass --launcher-scripts DIR)\n")
                   .c_str(),
               stderr);
  fs::path logos = kernelspec_source_dir();
  for (const char* logo : {"logo-32x32.png", "logo-64x64.png", "logo-svg.svg"}) {
    if (!fs::exists(logos / logo)) continue;
    fs::copy_file(logos / logo, dir / logo, fs::copy_options::overwrite_existing, ec);
    if (ec) throw UsageError("cannot copy " + std::string(logo) + ": " + ec.message());
  }
  return dir;
}

}  // namespace belljar
