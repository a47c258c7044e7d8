#pragma once
// CPU the session spends while no request runs: a daemon thread a cell left spinning. It used
// to be free (25 s of CPU under a 10 s --cpu policy, and the next cell said ok). Now the idle
// stretches between cells are added up; the next cell starts with them already charged to its
// --cpu budget, and the reactor stops the sandbox when they alone pass --cpu.
// Complete/inspect lookups pause the clock: they are requests, not background work.
namespace belljar {

class BackgroundCpu {
 public:
  // A new worker is ready: nothing spent in the background yet. `cpu` is the worker's CPU
  // clock (WorkerProcess::cpu_seconds) at each of these moments.
  void worker_ready(double cpu) { spent_ = 0, mark_ = cpu, idle_ = true; }
  // A request starts: the idle stretch up to now is added.
  void request_started(double cpu) {
    if (idle_) spent_ += positive(cpu - mark_);
    idle_ = false;
  }
  // A request ended: a new idle stretch starts; a cell's end starts the count afresh (the
  // cell was charged what came before it).
  void request_finished(double cpu, bool was_cell) {
    if (was_cell) spent_ = 0;
    mark_ = cpu, idle_ = true;
  }
  // CPU spent while idle since the last cell ended.
  double spent(double cpu) const { return spent_ + (idle_ ? positive(cpu - mark_) : 0); }

 private:
  static double positive(double x) { return x > 0 ? x : 0; }
  double spent_ = 0, mark_ = 0;
  bool idle_ = false;
};

}  // namespace belljar
