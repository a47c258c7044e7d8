#pragma once
// The connection file Jupyter writes for a kernel: where to bind and the signing key.
// It stays with the supervisor; nothing of it is handed to the worker.
#include <string>

namespace belljar {

struct ConnectionInfo {
  std::string transport;  // "tcp" or "ipc"
  std::string ip;
  int shell_port = 0, iopub_port = 0, stdin_port = 0, control_port = 0, hb_port = 0;
  std::string key;
  std::string signature_scheme;

  std::string endpoint(int port) const;  // "tcp://127.0.0.1:5555" or "ipc://path-5555"
};

// Throws UsageError naming the file and what is wrong with it.
ConnectionInfo read_connection_file(const std::string& path);
ConnectionInfo parse_connection_info(const std::string& text, const std::string& path);

}  // namespace belljar
