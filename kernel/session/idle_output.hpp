#pragma once
// Output the worker produces while no request runs: what an asyncio task, a thread a cell
// started or a timer prints, displays or sends to a widget between cells. It reaches the client
// as under ipykernel, parented to the last cell, and is bounded here: a part of the Kernel's
// output routing with one job, tested alone (tests/unit/kernel/session/idle_output.cpp).
//
// Threat: the worker decides how much it outputs between cells, and for how long; no cell's
// --output-limit ends it. So output between requests has a budget of its own: --output-limit
// bytes and kMessagesPerWindow messages (the frames: displays, comm messages) a window, refilled
// only by time. Past it output is withheld, never queued (the supervisor does not wait on the
// worker), and the client is told once a window.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "kernel/output/output_stream.hpp"

namespace belljar {

class IdleOutput {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kWindow{60};
  // A progress bar redrawn a hundred times a second fits; a flood of tiny messages does not.
  static constexpr uint64_t kMessagesPerWindow = 10'000;

  // The budget output between requests is charged to at `now`: refilled to `limit` once a
  // window has passed since it was last filled.
  OutputBudget& budget(Clock::time_point now, uint64_t limit);
  // One message more in the window at `now`; false (and withheld) past kMessagesPerWindow.
  bool admit_message(Clock::time_point now, uint64_t limit);
  // Something did not reach the client as sent; the first reason of a window is told.
  void withhold(const std::string& why);
  // The notice for the client, once a window that withheld anything (text past the budget
  // included); nullopt otherwise.
  std::optional<std::string> take_notice();

 private:
  void refill(Clock::time_point now, uint64_t limit);

  OutputBudget budget_;
  std::optional<Clock::time_point> filled_;
  uint64_t messages_ = 0;
  std::string first_withheld_;
  bool told_ = false;
};

}  // namespace belljar
