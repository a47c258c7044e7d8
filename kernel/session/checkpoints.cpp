#include "kernel/session/checkpoints.hpp"

#include <sys/random.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "kernel/protocol/json_field.hpp"

namespace belljar {

using json = nlohmann::json;

namespace {

std::string fresh_handle() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) throw std::runtime_error("getrandom failed");
    got += static_cast<size_t>(n);
  }
  std::string handle = "ckpt_";
  char hex[3];
  for (unsigned char b : bytes) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    handle += hex;
  }
  return handle;
}

json refused(const std::string& why) {
  return {{"type", "checkpoint_reply"}, {"error", why}};
}

std::string in_quotes(const std::string& name) {
  return "'" + name + "'";
}

}  // namespace

bool Checkpoints::valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name.rfind("ckpt_", 0) == 0) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

bool Checkpoints::valid_reference(const std::string& text) {
  if (valid_name(text)) return true;
  if (text.size() != 37 || text.rfind("ckpt_", 0) != 0) return false;
  return std::all_of(text.begin() + 5, text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

json Checkpoints::ask(const json& request, const Facts& facts) {
  if (!facts.in_cell) return refused("checkpoints are made and used by cells only");
  std::string op = json_field(request, "op", "");
  std::string name = json_field(request, "name", "");
  if (name.size() > 200) return refused("a checkpoint's name is at most 64 characters");
  if (op == "forget") {
    // The worker found the checkpoint's process gone: the rollback it was part of fails.
    std::erase_if(entries_, [&](const Entry& e) { return e.handle == name; });
    return {{"type", "checkpoint_reply"}};
  }
  pending_.reset();
  if (op == "list") return list();
  if (op == "drop") return drop(name);
  if (op != "make" && op != "rollback") return refused("unknown checkpoint operation");
  if (limit_ == 0) return refused("checkpoints are off in this session (--checkpoints 0)");
  if (facts.refusal) return refused(*facts.refusal);
  return op == "make" ? make(name, facts) : rollback(name);
}

json Checkpoints::make(const std::string& asked, const Facts& facts) {
  std::string name = asked;
  if (name.empty()) {
    do name = "cp" + std::to_string(++made_);
    while (find(name) != entries_.end());
  } else if (!valid_name(name)) {
    return refused("a checkpoint's name is 1 to 64 letters, digits, '_', '-' or '.' (" +
                   in_quotes(name.substr(0, 64)) + " is not)");
  } else if (find(name) != entries_.end()) {
    return refused("a checkpoint named " + in_quotes(name) +
                   " exists: choose another name, or %drop_checkpoint it first");
  }
  Entry entry{fresh_handle(), name, facts.execution_count, std::chrono::system_clock::now()};
  json reply = {{"type", "checkpoint_reply"}, {"handle", entry.handle}, {"drop", json::array()}};
  std::string text = "checkpoint " + in_quotes(name) + " kept (In [" +
                     std::to_string(entry.execution_count) + "])";
  if (entries_.size() >= limit_) {
    // The oldest goes first, so the session never holds more than the bound at once.
    const Entry& oldest = entries_.front();
    reply["drop"].push_back(oldest.handle);
    text += "; the oldest, " + in_quotes(oldest.name) + ", was dropped (--checkpoints " +
            std::to_string(limit_) + ")";
    entries_.erase(entries_.begin());
  }
  reply["text"] = text;
  pending_ = Pending{"make", std::move(entry)};
  return reply;
}

json Checkpoints::rollback(const std::string& name) {
  if (entries_.empty()) return refused("this session has no checkpoint: make one with %checkpoint");
  auto it = name.empty() ? entries_.end() - 1 : find(name);
  if (it == entries_.end())
    return refused("no checkpoint " + in_quotes(name.substr(0, 64)) +
                   " in this session (%checkpoints lists them)");
  pending_ = Pending{"rollback", *it};
  return {{"type", "checkpoint_reply"},
          {"handle", it->handle},
          {"text", "rolled back to " + in_quotes(it->name) + " (In [" +
                       std::to_string(it->execution_count) + "])"}};
}

json Checkpoints::drop(const std::string& name) {
  auto it = find(name);
  if (it == entries_.end())
    return refused("no checkpoint " + in_quotes(name.substr(0, 64)) +
                   " in this session (%checkpoints lists them)");
  json reply = {{"type", "checkpoint_reply"},
                {"drop", json::array({it->handle})},
                {"text", "dropped checkpoint " + in_quotes(it->name)}};
  pending_ = Pending{"drop", {}, {{"op", "drop"}, {"checkpoint", it->handle}, {"name", it->name}}};
  entries_.erase(it);
  return reply;
}

json Checkpoints::list() {
  std::string text;
  json all = json::array();
  for (const Entry& entry : entries_) {
    text +=
        entry.name + "  In [" + std::to_string(entry.execution_count) + "]  " + entry.handle + "\n";
    all.push_back(describe(entry));
  }
  if (entries_.empty()) text = "no checkpoints in this session\n";
  text.pop_back();
  pending_ = Pending{"list", {}, {{"op", "list"}, {"checkpoints", all}}};
  return {{"type", "checkpoint_reply"}, {"text", text}, {"checkpoints", all}};
}

json Checkpoints::describe(const Entry& entry) const {
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(entry.made.time_since_epoch());
  return {{"checkpoint", entry.handle},
          {"name", entry.name},
          {"execution_count", entry.execution_count},
          {"made_at", seconds.count()}};
}

std::vector<Checkpoints::Entry>::iterator Checkpoints::find(const std::string& name_or_handle) {
  return std::find_if(entries_.begin(), entries_.end(), [&](const Entry& entry) {
    return entry.name == name_or_handle || entry.handle == name_or_handle;
  });
}

Checkpoints::Settled Checkpoints::settle(bool ok) {
  Settled settled;
  if (!pending_) return settled;
  Pending pending = std::move(*pending_);
  pending_.reset();
  if (!pending.facts.is_null()) {
    settled.facts = std::move(pending.facts);
    settled.facts["ok"] = ok;
    return settled;
  }
  settled.facts = describe(pending.entry);
  settled.facts["op"] = pending.op;
  settled.facts["ok"] = ok;
  if (pending.op == "make") {
    if (ok) entries_.push_back(pending.entry);
    return settled;
  }
  // A rollback that failed changed nothing: the checkpoint stays (the worker says `forget` when
  // its process is gone).
  if (ok) settled.execution_count = pending.entry.execution_count;
  return settled;
}

void Checkpoints::forget_all() {
  entries_.clear();
  pending_.reset();
}

}  // namespace belljar
