#pragma once
// The requests handed to the worker whose output may come later, named by the worker: a cell's
// asyncio task keeps that cell as its parent, and a thread may name a cell as its own
// (get_ipython().set_parent, as under ipykernel 7), so text it writes while another cell runs
// still lands under the cell that started it (worker/belljar_worker/output_parents.py).
//
// The worker can only name a request it was given: a msg_id it never saw, or one too old to be
// kept, names none, and such output is dropped. Only headers are kept (a cell's code can be
// megabytes), and only the newest kMaxRequests of them: tasks that outlive that many cells
// lose their parent.
#include <cstddef>
#include <deque>
#include <string_view>

#include "kernel/protocol/wire_message.hpp"

namespace belljar {

class RequestParents {
 public:
  static constexpr size_t kMaxRequests = 256;

  // A request handed to the worker (an execute or a comm message): its header alone is kept.
  void remember(const WireMessage& request);
  // The newest request remembered with this msg_id (a client may reuse one), else null.
  const WireMessage* find(std::string_view msg_id) const;
  size_t size() const { return requests_.size(); }

 private:
  std::deque<WireMessage> requests_;
};

}  // namespace belljar
