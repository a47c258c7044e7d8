#pragma once
// The frontend's comm messages that arrive while a cell runs in the worker: a part of the
// Kernel with one job, tested alone (tests/unit/kernel/session/comms_during_cell.cpp).
//
// Why: a cell that awaits a widget's answer (`await` on a future a comm handler resolves) must
// get it while it awaits, as under ipykernel 7, which serves comm messages while a cell awaits;
// queued behind the cell, the message would wait for the cell that waits for it. So such a
// message is handed to the worker at once, ahead of the requests queued behind the cell. The
// worker runs its handler when the cell's loop turns (never in the middle of the cell's sync
// code), or after the cell ends (comm_link.cpp; worker/PROTOCOL.md, "Comms during a cell").
//
// One at a time, in the order they came: the next is handed once the worker said the one before
// was handled, so at most one comm frame waits unread in the worker's socket (a sync cell reads
// nothing), and a large one (a file uploaded from the page) waits for the cell's end with every
// message after it, in the supervisor, where the queue lives anyway.
//
// Threat: the worker. For the one message handed to it, it may say that its handler began
// (`comm_begin`, once) and then that it ended (`done`), nothing else and in that order; every
// other claim is refused. Output between the two is the handler's, parented to that message
// (one the client sent: the worker never picks a parent) and charged to the cell's budget.
// Exactly once: the worker serves a handed message only inside its cell, saying `comm_begin`
// first, and drops it after the cell. So when the cell ends (or the worker is lost), the one
// whose handler had not begun never ran: it goes back to the front of the queue, with those
// not handed, in order, to be served as an ordinary comm request; one that had begun is not
// served again.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "kernel/protocol/wire_message.hpp"

namespace belljar {

class CommsDuringCell {
 public:
  // A comm frame larger than this is not handed while a cell runs: unread by a sync cell, it
  // would hold the worker's socket (the outbox faults a worker that leaves 8 MiB unread).
  static constexpr size_t kMaxHandedBytes = 1u << 20;

  struct Handed {
    WireMessage request;
    std::string id;  // the frame id the worker was given
    bool begun = false;
  };

  // A comm message arrived while the cell runs: it waits its turn, after those before it.
  void arrive(WireMessage message) { waiting_.push_back(std::move(message)); }
  // The next message may go to the worker now: none is there unfinished, none is held.
  bool ready_to_hand() const { return !handed_ && !held_ && !waiting_.empty(); }
  const WireMessage& next() const { return waiting_.front(); }
  // next() was sent to the worker as frame `id`.
  void hand(std::string id);
  // next() is dropped (it names no comm: nothing to deliver it to).
  void drop_next() { waiting_.pop_front(); }
  // next() is too large to hand during the cell: it and everything after wait for its end.
  void hold_rest() { held_ = true; }

  // The worker's word on the handed message, `id` its frame id. begin: its handler starts now
  // (false: not the handed one, or said twice). finish: its handler ended, after begin; the
  // message, or nullopt for any other id or order.
  bool begin(std::string_view id);
  std::optional<WireMessage> finish(std::string_view id);
  // The handed message's handler runs now (begun, not finished); running(): that message.
  bool runs(std::string_view id) const { return handed_ && handed_->begun && handed_->id == id; }
  const WireMessage* running() const {
    return handed_ && handed_->begun ? &handed_->request : nullptr;
  }
  // Handlers that ran to their end during this cell, counted afresh for the next.
  uint64_t take_handled() { return std::exchange(handled_, 0); }

  // The cell ended: what is left, taken out (the state is fresh for the next cell).
  std::optional<Handed> take_handed();
  std::deque<WireMessage> take_waiting();

 private:
  std::deque<WireMessage> waiting_;
  std::optional<Handed> handed_;
  bool held_ = false;
  uint64_t handled_ = 0;
};

}  // namespace belljar
