#include "sandbox/egress_api/allowlist.hpp"

#include <algorithm>
#include <cctype>

namespace belljar {

namespace {

bool valid_dns_name(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  size_t label = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '.') {
      if (label == 0 || label > 63) return false;
      label = 0;
      continue;
    }
    char c = name[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-')) return false;
    ++label;
  }
  return true;
}

bool rule_matches_host(const HostRule& rule, const RequestHost& host) {
  if (auto rule_address = IpAddress::parse(rule.host))
    return host.literal && *host.literal == *rule_address;
  if (host.literal) return false;  // a name rule never matches an address
  if (rule.host.rfind("*.", 0) == 0) {
    std::string_view suffix = std::string_view(rule.host).substr(1);  // ".example.com"
    return host.name.size() > suffix.size() &&
           std::string_view(host.name).substr(host.name.size() - suffix.size()) == suffix;
  }
  return host.name == rule.host;
}

}  // namespace

std::optional<RequestHost> normalize_host(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    auto address = IpAddress::parse(text.substr(1, text.size() - 2));
    if (!address || address->family != AF_INET6) return std::nullopt;
    return RequestHost{address->text(), address};
  }
  if (auto address = IpAddress::parse(text)) return RequestHost{address->text(), address};
  std::string name(text);
  if (!name.empty() && name.back() == '.') name.pop_back();
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!valid_dns_name(name)) return std::nullopt;
  return RequestHost{name, std::nullopt};
}

HostVerdict match_host(const std::vector<HostRule>& rules, const RequestHost& host, uint16_t port) {
  HostVerdict verdict;
  for (const auto& rule : rules) {
    if (!rule_matches_host(rule, host)) continue;
    if (std::find(rule.ports.begin(), rule.ports.end(), port) != rule.ports.end()) {
      // Several rules may name the host; a local one wins, since it allows strictly more.
      if (verdict.kind != HostVerdict::Kind::allowed || (rule.local && !verdict.rule->local)) {
        verdict.kind = HostVerdict::Kind::allowed;
        verdict.rule = &rule;
      }
    } else if (verdict.kind != HostVerdict::Kind::allowed) {
      verdict.kind = HostVerdict::Kind::port_not_allowed;
      for (uint16_t p : rule.ports)
        if (std::find(verdict.allowed_ports.begin(), verdict.allowed_ports.end(), p) ==
            verdict.allowed_ports.end())
          verdict.allowed_ports.push_back(p);
    }
  }
  if (verdict.kind == HostVerdict::Kind::allowed) verdict.allowed_ports.clear();
  std::sort(verdict.allowed_ports.begin(), verdict.allowed_ports.end());
  return verdict;
}

std::string rule_flag_text(const HostRule& rule) {
  if (!rule.secret.empty()) return rule.secret;
  return std::string(rule.local ? "--allow-local-net " : "--allow-net ") + rule.text();
}

}  // namespace belljar
