#pragma once
// The session's checkpoints as the supervisor keeps them: each one's handle, its name and the
// execution count a rollback returns to; at most --checkpoints of them, the oldest dropped with
// a notice. Their processes are the worker's (worker/belljar_worker/checkpoints.py: a parked
// copy-on-write fork per checkpoint); what a checkpoint means to the session is decided here.
// A `%checkpoint`, `%rollback`, `%checkpoints` or `%drop_checkpoint` cell (MCP's tools run the
// same cells) sends a checkpoint_request frame; ask() answers it, and settle() applies the
// change when the cell ends: a kept checkpoint, or the execution count of the one returned to.
// A rollback that finds its checkpoint's process gone says `forget` first, and fails.
// Threat: the worker. It names the operation and the name it wants, nothing else: the handles
// are minted here (unguessable, so one never names another session's), names are checked by
// shape, the bound is ours, and a rollback's execution count comes from our table. What the
// worker does with the answer only ever affects its own session. A checkpoint whose pages the
// sandbox's memory cgroup cannot charge (no cgroup, --memory set) is refused, as during a debug
// session (the debugger's threads cannot be carried across the fork).
// Doors: none; it holds the table and answers questions.
#include <chrono>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace belljar {

class Checkpoints {
 public:
  struct Entry {
    std::string handle;  // "ckpt_" and 32 hex digits
    std::string name;    // the user's, or cp<N>
    int execution_count = 0;
    std::chrono::system_clock::time_point made;
  };
  // What the session is like when a cell asks: reasons to refuse a new checkpoint or rollback.
  struct Facts {
    bool in_cell = false;     // the request is a cell (not a comm handler)
    int execution_count = 0;  // the session's, now
    std::optional<std::string> refusal;
  };
  // What the cell's end changed, for its reply's metadata.belljar.checkpoint and the audit log.
  struct Settled {
    nlohmann::json facts;                // null when the cell asked nothing
    std::optional<int> execution_count;  // a rollback's: the session's count from now on
  };

  explicit Checkpoints(size_t limit) : limit_(limit) {}

  // The checkpoint_reply frame for a checkpoint_request.
  nlohmann::json ask(const nlohmann::json& request, const Facts& facts);
  // The cell that asked ended (ok: without an error).
  Settled settle(bool ok);
  // The worker went (restart, crash, shutdown): its checkpoints went with it.
  void forget_all();
  const std::vector<Entry>& entries() const { return entries_; }

  static bool valid_name(const std::string& name);
  // A name or a handle, by shape (what MCP's tools accept before they run a magic's cell).
  static bool valid_reference(const std::string& text);

 private:
  struct Pending {
    std::string op;                  // make, rollback, drop or list
    Entry entry;                     // make's and rollback's
    nlohmann::json facts = nullptr;  // list's and drop's, told as they are
  };
  nlohmann::json make(const std::string& name, const Facts& facts);
  nlohmann::json rollback(const std::string& name);
  nlohmann::json drop(const std::string& name);
  nlohmann::json list();
  std::vector<Entry>::iterator find(const std::string& name_or_handle);
  nlohmann::json describe(const Entry& entry) const;

  size_t limit_;
  std::vector<Entry> entries_;  // oldest first
  std::optional<Pending> pending_;
  uint64_t made_ = 0;  // for the default names
};

}  // namespace belljar
