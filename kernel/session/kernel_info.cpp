#include "kernel/session/kernel_info.hpp"

#include "kernel/protocol/replies.hpp"

namespace belljar {

nlohmann::json kernel_info(const KernelFacts& facts) {
  // What the sandbox lacks is the client's to read too (belljar.notes), not only the banner's.
  nlohmann::json content = create_kernel_info_reply(facts.life.language_info(), banner(facts));
  // JupyterLab enables its debugger from the kernelspec; the reply says what this session has.
  content["debugger"] = facts.debugger;
  if (facts.debugger) content["supported_features"] = nlohmann::json::array({"debugger"});
  content["belljar"] = {{"isolation", isolation_name(facts.policy.isolation)},
                        {"notes", facts.life.notes()}};
  nlohmann::json& audit = content["belljar"]["audit_log"];
  audit = {{"destination", facts.audit_destination}, {"failures", facts.audit.failures()}};
  if (!facts.audit_fallback.empty()) audit["fallback"] = facts.audit_fallback;
  if (facts.audit.failures() > 0) {
    audit["last_failure"] = facts.audit.last_failure();
    audit["cells_refused"] = facts.policy.audit_required;
  }
  return content;
}

std::string banner(const KernelFacts& facts) {
  // Where the records go, on a line of its own: a file of the kernel's own is named nowhere else.
  std::string audit = "\nAudit log: " + facts.audit_destination +
                      (facts.audit_fallback.empty() ? "" : " (" + facts.audit_fallback + ")");
  // The audit log failing is as loud as the sandbox's state: records are being lost.
  if (facts.audit.failures() > 0)
    audit += " — AUDIT LOG FAILING: " + facts.audit.failure_text() +
             (facts.policy.audit_required ? "; cells are refused (--audit-required)."
                                          : "; cells still run (no --audit-required).");
  return sandbox_banner(facts.policy, facts.life) + audit;
}

std::string sandbox_banner(const Policy& policy, const WorkerLife& life) {
  std::string python = life.language_info().value("version", "?");
  std::string mode = isolation_name(policy.isolation);
  std::string text = "belljar " BELLJAR_VERSION " — Python " + python + " ";
  // Active output runs in the notebook page with the server's authority: as loud as no sandbox.
  std::string output =
      policy.active_output == ActiveOutput::allow
          ? " ACTIVE OUTPUT IS NOT ISOLATED (--active-output allow): scripts a cell "
            "displays run in your browser with the notebook server's authority."
          : "";
  if (policy.isolation == Isolation::none)
    return text +
           "with NO SANDBOX (--isolation none): code runs with your privileges, "
           "environment and network." +
           output;
  // A degraded sandbox says what it lacks (host_check.hpp, the warden), one note after another.
  std::string lacks;
  for (const auto& note : life.notes()) lacks += (lacks.empty() ? "; it lacks: " : "; ") + note;
  return text + "in a sandbox (isolation " + mode + ")" + lacks +
         (output.empty() ? "" : ";" + output);
}

}  // namespace belljar
