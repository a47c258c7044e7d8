#pragma once
// A fixture of tests/build/structure_counts_selftest.py, read as text and never compiled: a
// `Kernel` at the structure counts' limits (scripts/structure_counts.py), exactly 40 member
// functions and 20 fields, in the shapes the real header uses (inline bodies, defaulted and
// deleted members, a nested struct, initializers of every kind, comments holding `(` and `;`).
// The self-test breaks each rule with one line at a `structure_counts_selftest:` marker.
#include <functional>

namespace belljar {

class Kernel;  // a forward declaration is no class body
struct KernelOptions {
  int a = 0, b = 1;  // not the Kernel's
  void not_the_kernels();
};

class Kernel final {
  friend struct KernelProbe;

 public:
  explicit Kernel(KernelOptions options);                        // 1
  ~Kernel();                                                     // 2
  Kernel(const Kernel&) = delete;                                // deleted: not counted
  Kernel& operator=(const Kernel&) = delete;                     // deleted: not counted
  Kernel(Kernel&&) = default;                                    // 3
  int run(Frontend& frontend);                                   // 4
  bool shutting_down() const { return shutting_down_; }          // 5
  const std::string& session_id() const { return session_id_; }  // 6
  // structure_counts_selftest: a member function here
  [[nodiscard]] static Kernel make(int argc, char** argv);  // 7
  template <typename Visit>
  void each_cell(Visit&& visit) const {  // 8
    for (auto& c : cells_) { visit(c); }
  }
  bool operator==(const Kernel& other) const;  // 9

 private:
  // A nested type's members (and this comment's `f(x);`) are not the Kernel's.
  struct Cell {
    int id = 0;
    std::string code;
    bool running() const { return id != 0; }
  };
  struct Totals {
    uint64_t requests = 0;
  } totals_;  // field 1
  using FrameHandler = void (Kernel::*)(const json&);
  static constexpr uint64_t kCommMessagesPerRequest = 10'000;  // a constant, not a field
  static constexpr auto kTrimWhenIdleFor = std::chrono::milliseconds(250);

  void poll_once();                                           // 10
  void handle_signals();                                      // 11
  Clock::time_point next_deadline() const;                    // 12
  void serve_control(const WireMessage& message);             // 13
  void request_failed(Channel channel, const WireMessage& message,
                      const std::exception& e);               // 14
  void dispatch_next();                                       // 15
  void start_request(const WireMessage& message);             // 16
  void reply(Channel channel, const WireMessage& parent, const std::string& type, json content,
             json metadata = json::object());                 // 17
  std::optional<json> checked_display(WorkerFrame type, const json& frame,
                                      OutputBudget& budget);  // 18
  std::vector<std::pair<int, int>> pairs() const;             // 19
  void take_frames(WorkerFrameDecoder& decoder, std::string_view bytes,
                   FrameHandler handle);                      // 20
  bool executing() const { return cell_ && cell_->id; }       // 21
  bool running_code() const {                                 // 22
    return cell_ && (cell_->id == 1 || cell_->id == 2);
  }
  void on_done(const json& frame) override;                   // 23
  virtual void publish(const std::string& type) = 0;          // 24
  static int clamp(int value);                                // 25
  void a1();                                                  // 26
  void a2();                                                  // 27
  void a3();                                                  // 28
  void a4();                                                  // 29
  void a5();                                                  // 30
  void a6();                                                  // 31
  void a7();                                                  // 32
  void a8();                                                  // 33
  void a9();                                                  // 34
  void a10();                                                 // 35
  void a11();                                                 // 36
  void a12();                                                 // 37
  void a13();                                                 // 38
  void a14();                                                 // 39
  auto a15() -> int;                                          // 40

  std::string session_id_;                                                // 2
  bool shutting_down_ = false;                                            // 3
  bool pipe_open_[2] = {false, false};                                    // 4
  std::optional<Cell> cell_;                                              // 5
  std::vector<Cell> cells_;                                               // 6
  NewestEntries<std::string> recent_cells_{100, 256u << 10};              // 7
  std::map<std::string, std::vector<int>> by_name_;                       // 8
  ParentWatch parent_ = ParentWatch::from_environment(::getenv("JPY_X"));  // 9
  json language_info_ = json::object();                                   // 10
  int execution_count_ = 0, restarts_ = 0;                                // 11, 12
  std::function<void(int)> on_exit_;                                      // 13
  void (*on_signal_)(int) = nullptr;                                      // 14
  FrameHandler handler_ = &Kernel::poll_once;                             // 15
  void (Kernel::*member_handler_)(const json&) = nullptr;                 // 16
  Clock::time_point next_cpu_sample_{};                                   // 17
  static int instances_;                                                  // 18: static state
  Frontend* frontend_ = nullptr;                                          // 19
  std::optional<std::string>
      background_stop_;  // 20
  // structure_counts_selftest: a field here
};

}  // namespace belljar
