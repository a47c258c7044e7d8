#pragma once
// The sandbox's network: a fresh network namespace holds only a loopback device, down. Init
// brings it up so that localhost works (a server and client inside the sandbox, and later the
// egress proxy's local end), while nothing routes out.
namespace belljar {

void bring_up_loopback();  // throws SetupError

}  // namespace belljar
