#pragma once
// Privileges the worker leaves behind before it execs Python.
namespace belljar {

// Empties the bounding, ambient, inheritable, permitted and effective sets and locks the
// securebits so that no uid change can bring capabilities back. Dropping the bounding set
// needs CAP_SETPCAP; without it (degraded, unprivileged) that part is skipped: no_new_privs
// already keeps exec from granting anything.
void drop_capabilities();

// Just the bounding set (when CAP_SETPCAP allows): done before a switch from root to another
// uid, which takes CAP_SETPCAP away.
void drop_bounding_set();

// PR_SET_NO_NEW_PRIVS: setuid bits and file capabilities are ignored by every later exec.
void forbid_new_privileges();

}  // namespace belljar
