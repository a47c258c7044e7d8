#pragma once
// execute_reply's payload, as frontends act on it: JupyterLab and Notebook put a
// set_next_input's text into a cell (%load), show a page's bundle in the pager (`obj?`), and
// jupyter console quits on ask_exit (`exit`). The worker writes these, so each item passes only
// in the shape ipykernel gives its source, rebuilt from the checked fields; an item of another
// source or shape is dropped, never repaired. A page's bundle then meets the active-output
// rules like any output (active_output.hpp).
#include <nlohmann/json.hpp>

namespace belljar {

struct CheckedPayload {
  nlohmann::json items = nlohmann::json::array();
  size_t dropped = 0;
};
CheckedPayload checked_payload(const nlohmann::json& sent);

}  // namespace belljar
