#pragma once
// The requests handed to the worker whose output may come later, named by the worker: a cell's
// asyncio task keeps that cell as its parent, and a thread may name a cell as its own
// (get_ipython().set_parent, as under ipykernel 7), so text it writes while another cell runs
// still lands under the cell that started it (worker/belljar_worker/output_parents.py).
//
// The worker can only name a request it was given: a msg_id it never saw, or one too old to be
// kept, names none, and such output goes where output that names nothing goes (the request being
// served, else the last cell: idle_link.cpp), never lost and never placed by the worker. Only
// headers are kept, as text (a header parsed into JSON takes about five times its text; a cell's
// code, megabytes maybe, is not kept at all), and only the newest kMaxRequests within kMaxBytes
// (the supervisor's own memory: a task that outlives that many cells shows with the last one).
// The bytes bound also holds against a client sending huge headers.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "kernel/protocol/wire_message.hpp"
#include "kernel/session/newest_entries.hpp"

namespace belljar {

class RequestParents {
 public:
  static constexpr size_t kMaxRequests = 64;
  static constexpr size_t kMaxBytes = 32 * 1024;

  // A request handed to the worker (an execute or a comm message): its header alone is kept.
  void remember(const WireMessage& request);
  // The newest request remembered with this msg_id (a client may reuse one), its header alone.
  std::optional<WireMessage> find(std::string_view msg_id) const;
  size_t size() const { return requests_.size(); }

 private:
  struct Remembered {
    std::string msg_id, header;  // the header as JSON text
  };
  NewestEntries<Remembered> requests_{kMaxRequests, kMaxBytes};
};

}  // namespace belljar
