#include "kernel/session/cell_budget.hpp"

#include <cstdio>

#include "kernel/protocol/bounded_json.hpp"
#include "sandbox/policy/quantities.hpp"

namespace belljar {

using json = nlohmann::json;

std::string output_limit_notice(const std::string& what, uint64_t bytes,
                                const OutputBudget& budget) {
  return "[belljar] " + what + " (" + format_size(bytes) + ") dropped: past the output limit of " +
         format_size(budget.limit());
}

std::string utf8_prefix(std::string_view text, size_t bytes) {
  if (text.size() <= bytes) return std::string(text);
  return std::string(text.substr(0, utf8_complete_prefix(text.substr(0, bytes))));
}

std::string charge_text(std::string_view text, OutputBudget& budget) {
  uint64_t granted = budget.take(text.size());
  return utf8_prefix(text, static_cast<size_t>(granted));
}

json charge_error(json error, OutputBudget& budget) {
  auto string_at = [&](const char* key) {
    auto it = error.find(key);
    return it != error.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string ename = utf8_prefix(string_at("ename"), kErrorNameBytes);
  std::string evalue = string_at("evalue");
  // The start of the message is kept whatever the budget says (the reply must say what
  // failed); past it, the message is charged like any output.
  std::string kept = utf8_prefix(evalue, kErrorValueBytes);
  budget.charge(ename.size() + kept.size());
  if (kept.size() < evalue.size())
    kept += charge_text(std::string_view(evalue).substr(kept.size()), budget);
  json traceback = json::array();
  uint64_t dropped = 0;
  if (auto tb = error.find("traceback"); tb != error.end() && tb->is_array()) {
    for (auto& line : *tb) {
      if (!line.is_string()) continue;
      const auto& text = line.get_ref<const std::string&>();
      if (dropped == 0 && budget.take_whole(text.size()))
        traceback.push_back(text);
      else
        dropped += text.size();
    }
  }
  if (kept.size() < evalue.size()) dropped += evalue.size() - kept.size();
  if (dropped > 0) {
    // take_whole counted the refused lines as dropped already; the cut message is counted here.
    traceback.push_back(output_limit_notice("the rest of this error", dropped, budget));
  }
  return {{"ename", ename}, {"evalue", kept}, {"traceback", std::move(traceback)}};
}

json charge_user_expressions(const json& sent, const json& asked, OutputBudget& budget) {
  json out = json::object();
  if (!sent.is_object() || !asked.is_object()) return out;
  for (auto& [name, expression] : asked.items()) {
    auto it = sent.find(name);
    if (it == sent.end() || !it->is_object()) continue;
    size_t size = dump_json(*it).size();
    if (budget.take_whole(size)) {
      out[name] = *it;
    } else {
      std::string notice = output_limit_notice("the value of this expression", size, budget);
      out[name] = {{"status", "error"},
                   {"ename", "OutputLimitError"},
                   {"evalue", notice},
                   {"traceback", json::array({notice})}};
    }
  }
  return out;
}

json charge_payload(const json& sent, OutputBudget& budget) {
  json out = json::array();
  if (!sent.is_array()) return out;
  for (auto& item : sent)
    if (budget.take_whole(dump_json(item).size())) out.push_back(item);
  return out;
}

json charge_request_reply(RequestKind kind, json reply, OutputBudget& budget) {
  auto charge_object = [&](const char* key, bool notice) {
    auto it = reply.find(key);
    if (it == reply.end()) return;
    size_t size = dump_json(*it).size();
    if (budget.take_whole(size)) return;
    *it = notice ? json{{"text/plain", output_limit_notice("this answer", size, budget)}}
                 : json::object();
  };
  if (kind == RequestKind::complete) {
    json kept = json::array();
    for (auto& match : reply["matches"])
      if (budget.take_whole(match.get_ref<const std::string&>().size())) kept.push_back(match);
    reply["matches"] = std::move(kept);
    charge_object("metadata", false);
  } else if (kind == RequestKind::inspect) {
    charge_object("data", true);
    charge_object("metadata", false);
  } else if (auto indent = reply.find("indent"); indent != reply.end()) {
    *indent = utf8_prefix(indent->get_ref<const std::string&>(), kErrorNameBytes);
  }
  return reply;
}

}  // namespace belljar
