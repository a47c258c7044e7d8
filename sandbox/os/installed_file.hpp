#pragma once
// belljar's own files that run with the kernel's identity: the jail helper (belljar-jail), exec'd
// for every sandbox, and the modules loaded only when a policy needs them (belljar-egress.so for
// --allow-net and --secret, belljar-gateway.so for `belljar launch`; both bring OpenSSL, which a
// kernel that needs neither never maps).
//
// Each is found from the kernel's own path (kernel/command_line/resources.cpp), never PATH or
// the working directory, opened once and checked: a regular file, owned by root or by the
// kernel's own user, writable by no one else (as root the kernel runs it with root's rights, so
// a file another user could replace would be their code in our place). What is checked is what
// runs: the helper is exec'd from the descriptor (execveat), a module loaded through it.
#include <exception>
#include <string>
#include <string_view>

#include "sandbox/os/fd.hpp"

namespace belljar {

// An O_PATH descriptor, close-on-exec, at 10 or above (clear of the fds 0-5 a warden's child
// arranges before it execs the helper). `what` names the file in errors ("the jail helper").
// An executable must have an execute bit; a module need not (Debian installs shared objects
// 0644, and CMake follows it). Throws SetupError naming the path, what is wrong and the fix.
enum class InstalledKind { executable, module };
Fd open_installed_file(const std::string& path, std::string_view what, InstalledKind kind);

// Loads the shared object behind `file` (an open_installed_file descriptor) and returns the
// address of its `symbol`. The module stays loaded for the life of the process: its threads and
// objects may outlive any one caller. Throws SetupError with the loader's message.
void* load_module_symbol(const Fd& file, std::string_view what, const char* symbol);

// A module's side of its entry point: what `make` returns, or null with `error` set, so that
// nothing thrown crosses the module's boundary.
template <typename Make>
auto made_or_null(Make make, std::string& error) -> decltype(make()) {
  try {
    return make();
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "an unknown error";
  }
  return nullptr;
}

}  // namespace belljar
