#pragma once
// The warden (warden.cpp): the jail helper's first process. It reads the JailSpec from the
// control socket, builds the jail from outside (maps, cgroup, bind sources), clones init into
// the new namespaces and serves the supervisor until the jail is gone.
namespace belljar {

// Runs the warden on `control` (the socket to the supervisor); returns the helper's exit status.
int run_warden(int control);

}  // namespace belljar
