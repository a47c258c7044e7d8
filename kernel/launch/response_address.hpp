#pragma once
// Where the gateway waits for the kernel's connection info (--response-address IP:PORT): one
// TCP connection, the payload, then close; the gateway reads to the end and answers nothing.
// A gateway that does not answer is tried again a bounded number of times, so a kernel whose
// gateway has gone never hangs its pod.
#include <chrono>
#include <cstdint>
#include <string>

namespace belljar {

struct ResponseAddress {
  std::string host;  // an IP literal or a name (a cluster service)
  uint16_t port = 0;
  std::string text() const;
};

// "10.0.0.5:8877", "[fd00::5]:8877", "gateway.svc:8877"; throws UsageError naming the flag.
ResponseAddress parse_response_address(const std::string& text);

struct SendPolicy {
  int attempts = 6;
  std::chrono::milliseconds first_wait{250};  // doubled after each failed attempt
  std::chrono::milliseconds connect_timeout{5000};
};

// Sends `payload` and closes. Throws std::runtime_error naming the address and the last
// failure once every attempt failed.
void send_to_response_address(const ResponseAddress& address, const std::string& payload,
                              const SendPolicy& policy = {});

}  // namespace belljar
