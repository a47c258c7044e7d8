"""Containment probes: each is code a user could run in a cell, and the exact outcome expected
inside the sandbox. `control` is what the same probe gives in an unsandboxed kernel
(--isolation none): proof that the probe would have escaped. Destructive probes have no control
and never run outside the sandbox.

A probe's code leaves its outcome in `result` (a string: "ok", an errno name, or a value)."""
from dataclasses import dataclass
from typing import Callable, Optional, Union

from belljar_testing import VALUE_SCAN_CELL

# Prelude run once per kernel: small helpers the probes share.
PRELUDE = r'''
import ctypes, errno, json, os, socket, signal, struct
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

def errname(code):
    return errno.errorcode.get(code, str(code))

def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errname(e.errno)

def sys_errno(nr, *args):
    ctypes.set_errno(0)
    r = _libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errname(ctypes.get_errno())

def read_text(path):
    with open(path, errors="replace") as f:
        return f.read()

def status_field(name):
    for line in read_text("/proc/self/status").splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
'''

Expect = Union[str, Callable[[str], bool]]


@dataclass
class Probe:
    name: str
    code: str
    sandbox: Expect                  # exact outcome inside, or a predicate
    control: Optional[Expect] = None  # outcome with --isolation none; None: not run outside
    root_control_only: bool = False   # the control only escapes when the kernel is root


X86_64 = {
    "mount": (165, 0, 0, 0, 0, 0), "umount2": (166, 0, 0), "pivot_root": (155, 0, 0),
    "chroot": (161, 0), "setns": (308, 0, 0x10000000), "unshare_user": (272, 0x10000000),
    "unshare_net": (272, 0x40000000), "ptrace_attach": (101, 16, 1, 0, 0),
    "process_vm_readv": (310, 1, 0, 0, 0, 0, 0), "process_vm_writev": (311, 1, 0, 0, 0, 0, 0),
    "bpf": (321, 0, 0, 0), "perf_event_open": (298, 0, 0, -1, -1, 0), "keyctl": (250, 0, 0),
    "add_key": (248, 0, 0, 0, 0, 0), "request_key": (249, 0, 0, 0, 0), "userfaultfd": (323, 0),
    "io_uring_setup": (425, 1, 0), "io_uring_enter": (426, 0, 0, 0, 0, 0),
    "io_uring_register": (427, 0, 0, 0, 0), "kexec_load": (246, 0, 0, 0, 0),
    "kexec_file_load": (320, 0, 0, 0, 0, 0), "init_module": (175, 0, 0, 0),
    "finit_module": (313, 0, 0, 0), "delete_module": (176, 0, 0),
    "open_by_handle_at": (304, 0, 0, 0), "swapon": (167, 0, 0), "swapoff": (168, 0),
    "reboot": (169, 0, 0, 0, 0), "iopl": (172, 3), "ioperm": (173, 0, 1, 1),
    "clock_settime": (227, 0, 0), "clock_adjtime": (305, 0, 0), "adjtimex": (159, 0),
    "settimeofday": (164, 0, 0),
    # clone with a namespace flag (CLONE_NEWNET | SIGCHLD): would fork if it were allowed.
    "clone_newnet": (56, 0x40000000 | 17, 0, 0, 0, 0),
}
X32_BIT = 0x40000000

PROBES = [
    Probe("secret in os.environ", "result = os.environ.get('BELLJAR_PROBE_SECRET', 'absent')",
          "absent", control=lambda out: out.startswith("sk-probe-")),
    Probe("secret in any /proc/*/environ",
          "found = []\n"
          "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
          "    try:\n"
          "        if b'sk-probe-' in open(f'/proc/{pid}/environ','rb').read(): found.append(pid)\n"
          "    except OSError: pass\n"
          "result = 'found' if found else 'none'", "none", control="found"),
    Probe("connection file", "result = attempt(lambda: read_text(CONNECTION_FILE))", "ENOENT", control="ok"),
    Probe("kernel key anywhere in /proc",
          "hits = []\n"
          "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
          "    for leaf in ('cmdline', 'environ'):\n"
          "        try:\n"
          "            if KERNEL_KEY.encode() in open(f'/proc/{pid}/{leaf}','rb').read(): hits.append(pid)\n"
          "        except OSError: pass\n"
          "result = 'none' if not hits else 'found'", "none"),
    Probe("file in the host home", "result = attempt(lambda: read_text(HOST_HOME_FILE))", "ENOENT", control="ok"),
    Probe("/root", "result = attempt(lambda: os.listdir('/root'))", "ENOENT", control="ok", root_control_only=True),
    Probe("/home", "result = str(os.listdir('/home'))", "['sandbox']"),
    Probe("/run and /var", "result = attempt(lambda: os.listdir('/run')) + ' ' + attempt(lambda: os.listdir('/var'))",
          "ENOENT ENOENT", control="ok ok"),
    # Masked means unreadable or empty, and never the secret.
    Probe("workspace .env is masked",
          "try:\n    result = repr(read_text('.env'))\nexcept OSError as e:\n    result = errname(e.errno)",
          lambda out: out in ("''", "EACCES"), control=lambda out: "sk-probe-dotenv" in out),
    Probe("workspace .ssh is masked",
          "try:\n    result = str(os.listdir('.ssh'))\nexcept OSError as e:\n    result = errname(e.errno)",
          lambda out: out in ("[]", "EACCES"), control=lambda out: "id_ed25519" in out),
    # Files the sandbox writes may land on the host as the workspace owner: never setuid/setgid.
    Probe("chmod setuid", "open('suid-probe', 'w').close(); result = attempt(lambda: os.chmod('suid-probe', 0o4755))",
          "EPERM", control="ok"),
    Probe("chmod setgid", "open('sgid-probe', 'w').close(); result = attempt(lambda: os.chmod('sgid-probe', 0o2755))",
          "EPERM", control="ok"),
    Probe("create setuid", "result = attempt(lambda: os.close(os.open('suid-create', os.O_CREAT | os.O_WRONLY, 0o4755)))\n"
          "result += ' ' + (oct(os.stat('suid-create').st_mode & 0o6000) if os.path.exists('suid-create') else 'absent')",
          lambda out: out.startswith("EPERM") or out.endswith("0o0"), control="ok 0o4000"),
    # The workspace broker: every change to a name is decided outside, before it is made.
    Probe("create a dot-file in the workspace", "result = attempt(lambda: open('.gitconfig', 'w').write('x'))",
          "EACCES", control="ok"),
    Probe("make a Python environment's packages",
          "result = attempt(lambda: os.makedirs('lib/python3.11/site-packages/x'))", "EACCES", control="ok"),
    Probe("link to a dot-folder", "result = attempt(lambda: os.symlink('.config', 'cfg-link'))",
          "EACCES", control="ok"),
    Probe("hard link", "open('hl-source', 'w').close(); result = attempt(lambda: os.link('hl-source', 'hl-twin'))",
          "EPERM", control="ok"),
    Probe("make a folder unreadable to the quota",
          "os.makedirs('hide-dir', exist_ok=True); result = attempt(lambda: os.chmod('hide-dir', 0o300))\n"
          "os.chmod('hide-dir', 0o700)", "EPERM", control="ok"),
    Probe("symlink out of the workspace", "result = attempt(lambda: read_text('escape-link'))", "ENOENT", control="ok"),
    Probe("/etc/shadow", "result = attempt(lambda: read_text('/etc/shadow'))", "ENOENT",
          control="ok", root_control_only=True),
    Probe("write outside the workspace",
          "result = attempt(lambda: open(OUTSIDE_DIR + '/escaped.txt', 'w').write('x'))",
          lambda out: out in ("ENOENT", "EROFS", "EACCES"), control="ok", root_control_only=True),
    Probe("write to /usr", "result = attempt(lambda: open('/usr/belljar-probe', 'w'))",
          lambda out: out in ("EROFS", "EACCES"), control="ok", root_control_only=True),
    Probe("write to /tmp is private", "open('/tmp/belljar-private', 'w').write('x'); result = 'ok'", "ok"),
    Probe("capabilities", "result = status_field('CapEff') + ' ' + status_field('CapBnd')",
          "0000000000000000 0000000000000000",
          control=lambda out: out != "0000000000000000 0000000000000000", root_control_only=True),
    Probe("no_new_privs", "result = status_field('NoNewPrivs')", "1", control="0"),
    Probe("seccomp filter", "result = status_field('Seccomp')", "2", control="0"),
    Probe("no controlling terminal", "result = attempt(lambda: os.open('/dev/tty', os.O_RDWR))",
          lambda out: out in ("ENOENT", "ENXIO")),
    Probe("core dumps off", "import resource; result = str(resource.getrlimit(resource.RLIMIT_CORE))", "(0, 0)"),
    # The worker's own signal-wakeup pipe is not inherited: set it aside, then list the rest.
    Probe("only documented fds are open",
          "import _signal, belljar_worker.current as _s\n"
          "_w = _signal.set_wakeup_fd(-1); _signal.set_wakeup_fd(_w)\n"
          "_own = {_w, _s.session.gate.wakeup.fd}\n"
          "import fcntl\n"
          "def _open(fd):\n"
          "    try: fcntl.fcntl(fd, fcntl.F_GETFD); return True\n"
          "    except OSError: return False\n"
          "# the listing's own directory fd is closed once listdir returns\n"
          "result = str(sorted(int(fd) for fd in os.listdir('/proc/self/fd') if int(fd) not in _own and _open(int(fd))))",
          lambda out: set(eval(out)) <= {0, 1, 2, 3, 4}),
    Probe("host processes in /proc", "result = 'visible' if os.path.exists(f'/proc/{HOST_PID}/status') else 'hidden'",
          "hidden", control="visible"),
    Probe("pid 1 is the jail init", "result = read_text('/proc/1/cmdline').split('\\0')[0]",
          lambda out: "python" not in out),
    Probe("ptrace traceme", "result = sys_errno(101, 0, 0, 0, 0)", "EPERM", control="ok"),
    Probe("TIOCSTI", "result = attempt(lambda: __import__('fcntl').ioctl(0, 0x5412, b'x'))", "EPERM",
          control="ENOTTY"),
    Probe("TIOCSTI with high bits", "result = sys_errno(16, 0, 0x5412 | (1 << 32), 0)", "EPERM", control="ENOTTY"),
    Probe("TIOCLINUX", "result = sys_errno(16, 0, 0x541C, 0)", "EPERM", control="ENOTTY"),
    Probe("AF_PACKET socket", "result = attempt(lambda: socket.socket(17, socket.SOCK_RAW, 0))", "EPERM",
          control="ok", root_control_only=True),
    Probe("AF_VSOCK socket", "result = attempt(lambda: socket.socket(40, socket.SOCK_STREAM, 0))", "EPERM"),
    Probe("AF_ALG socket", "result = attempt(lambda: socket.socket(38, socket.SOCK_SEQPACKET, 0))", "EPERM"),
    Probe("modify_ldt", "result = sys_errno(154, 0, 0, 0)", "EPERM", control="ok"),
    # Netlink: NETLINK_ROUTE only (what getaddrinfo() reads interfaces through).
    Probe("AF_NETLINK NETLINK_ROUTE", "result = attempt(lambda: socket.socket(16, socket.SOCK_RAW, 0).close())",
          "ok", control="ok"),
    Probe("getaddrinfo localhost",
          "result = attempt(lambda: socket.getaddrinfo('localhost', 80, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG))",
          "ok", control="ok"),
    Probe("AF_NETLINK NETLINK_AUDIT", "result = attempt(lambda: socket.socket(16, socket.SOCK_RAW, 9).close())",
          "EPERM", control="ok"),
    Probe("AF_NETLINK NETLINK_NETFILTER", "result = attempt(lambda: socket.socket(16, socket.SOCK_RAW, 12).close())",
          "EPERM", control="ok"),
    Probe("AF_NETLINK NETLINK_KOBJECT_UEVENT", "result = attempt(lambda: socket.socket(16, socket.SOCK_DGRAM, 15).close())",
          "EPERM", control="ok"),
    Probe("AF_NETLINK NETLINK_XFRM", "result = attempt(lambda: socket.socket(16, socket.SOCK_RAW, 6).close())",
          "EPERM", control="ok"),
    Probe("AF_NETLINK protocol with high bits", "result = sys_errno(41, 16, 3, 9 | (1 << 32))", "EPERM"),
    # Memory no process's mappings show (the session's memory cap could not count it): ENOSYS,
    # as on a kernel without them. The controls remove what they made.
    Probe("memfd_create", "result = attempt(lambda: os.close(os.memfd_create('probe')))", "ENOSYS",
          control="ok"),
    Probe("SysV shmget", "r = _libc.shmget(0, 4096, 0o1600)\n"
          "result = 'ok' if r >= 0 else errname(ctypes.get_errno())\n"
          "r >= 0 and _libc.shmctl(r, 0, None)", "ENOSYS", control="ok"),
    Probe("SysV msgget", "r = _libc.msgget(0, 0o1600)\n"
          "result = 'ok' if r >= 0 else errname(ctypes.get_errno())\n"
          "r >= 0 and _libc.msgctl(r, 0, None)", "ENOSYS", control="ok"),
    Probe("SysV semget", "r = _libc.semget(0, 1, 0o1600)\n"
          "result = 'ok' if r >= 0 else errname(ctypes.get_errno())\n"
          "r >= 0 and _libc.semctl(r, 0, 0)", "ENOSYS", control="ok"),
    Probe("/dev has only the safe devices",
          "result = ' '.join(sorted(n for n in os.listdir('/dev') if not os.path.isdir('/dev/' + n) and not os.path.islink('/dev/' + n)))",
          "full null random urandom zero"),
    Probe("block devices", "result = attempt(lambda: os.open('/dev/vda', os.O_RDONLY))", "ENOENT"),
    Probe("/proc/sys write", "result = attempt(lambda: open('/proc/sys/kernel/hostname', 'w').write('x'))",
          lambda out: out in ("EROFS", "EACCES", "EPERM")),
    Probe("/sys write", "result = attempt(lambda: open('/sys/kernel/mm/transparent_hugepage/enabled', 'w').write('never'))",
          lambda out: out in ("ENOENT", "EROFS", "EACCES")),
    Probe("host uid of the code", "result = str(os.getpid())", lambda out: out.isdigit()),
    Probe("x32 getpid", f"result = sys_errno(39 | {X32_BIT})", "EPERM"),
    Probe("x32 mount", f"result = sys_errno(165 | {X32_BIT}, 0, 0, 0, 0, 0)", "EPERM"),
] + [
    Probe(f"syscall {name}", f"result = sys_errno{args}", "EPERM")
    for name, args in X86_64.items()
] + [
    Probe("host loopback TCP", "s = socket.socket(); s.settimeout(3)\n"
          "result = attempt(lambda: s.connect(('127.0.0.1', HOST_TCP_PORT)))", "ECONNREFUSED", control="ok"),
    Probe("host loopback IPv6", "s = socket.socket(socket.AF_INET6); s.settimeout(3)\n"
          "result = attempt(lambda: s.connect(('::1', HOST_TCP6_PORT)))",
          lambda out: out in ("ECONNREFUSED", "EADDRNOTAVAIL", "ENETUNREACH"), control="ok"),
    Probe("host abstract unix socket", "s = socket.socket(socket.AF_UNIX)\n"
          "result = attempt(lambda: s.connect('\\0' + HOST_ABSTRACT))", "ECONNREFUSED", control="ok"),
    Probe("no route out of the sandbox",
          "result = str(len(read_text('/proc/net/route').splitlines()) - 1) + ' ' + "
          "' '.join(sorted(os.listdir('/sys/class/net')) if os.path.isdir('/sys/class/net') else ['lo'])",
          "0 lo"),
    Probe("UDP to host loopback", "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
          "s.sendto(b'probe', ('127.0.0.1', HOST_UDP_PORT)); result = 'sent'", "sent", control="sent"),
]

# Secrets bound to a host (--secret NAME@HOST): these rows run in a kernel that binds
# BELLJAR_PROBE_BOUND to an HTTPS echo stand-in (BOUND_ECHO_PORT) and to a plain HTTP one
# (BOUND_PLAIN_PORT), with a second allowlisted HTTPS echo that has no secret (UNBOUND_ECHO_PORT).
# Their control is the way users had to do it before: the same value given with --pass-env.
# A probe never holds the value: it looks for it by BOUND_NEEDLE (its first half, length and
# SHA-256), and its outcome is a word, never the value.
SECRET_PRELUDE = VALUE_SCAN_CELL + r'''
import hashlib, re
import requests

BOUND = 'BELLJAR_PROBE_BOUND'

def what_it_is(text):
    if holds(text, BOUND_NEEDLE):
        return 'value'
    if re.search(r'belljar-secret-BELLJAR_PROBE_BOUND-[0-9a-f]{32}', text):
        return 'placeholder'
    return 'neither'

def files_holding_the_value(roots):
    return [path for path in regular_files(roots) if holds(open(path, 'rb').read(), BOUND_NEEDLE)]

# Bound: the session bundle the kernel sets. Control: no bundle, so the stand-ins' own CA.
VERIFY = os.environ.get('REQUESTS_CA_BUNDLE') or 'probe-ca.crt'
AUTH = {'Authorization': 'Bearer ' + os.environ.get(BOUND, '')}
'''

SECRET_PROBES = [
    Probe("bound secret: the environment holds a placeholder",
          "result = what_it_is(os.environ.get(BOUND, ''))", "placeholder", control="value"),
    Probe("bound secret in any /proc/*/environ or /proc/*/cmdline",
          "found = []\n"
          "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
          "    for leaf in ('environ', 'cmdline'):\n"
          "        try:\n"
          "            if holds(open(f'/proc/{pid}/{leaf}', 'rb').read(), BOUND_NEEDLE): found.append(pid)\n"
          "        except OSError: pass\n"
          "result = 'found' if found else 'none'", "none", control="found"),
    Probe("bound secret written to /tmp, the home and the workspace",
          "for path in ('/tmp/stolen', os.path.expanduser('~/stolen'), 'stolen', '/dev/shm/stolen'):\n"
          "    open(path, 'w').write(os.environ.get(BOUND, ''))\n"
          "found = files_holding_the_value(['/tmp', '/dev/shm', '/etc', os.path.expanduser('~'), os.getcwd()])\n"
          "result = 'found' if found else 'none'", "none", control="found"),
    Probe("bound secret echoed back by its own host",
          "r = requests.get(f'https://localhost:{BOUND_ECHO_PORT}/echo?case=probe-echo', headers=AUTH,\n"
          "                 verify=VERIFY, timeout=20)\n"
          "result = what_it_is(r.text + ' '.join(r.headers.values()))", "placeholder", control="value"),
    Probe("bound secret sent to another allowlisted host",
          "r = requests.get(f'https://localhost:{UNBOUND_ECHO_PORT}/echo?case=probe-unbound', headers=AUTH,\n"
          "                 verify='probe-ca.crt', timeout=20)\n"
          "result = what_it_is(r.text)", "placeholder", control="value"),
    Probe("bound secret over plain HTTP to its host",
          "r = requests.get(f'http://localhost:{BOUND_PLAIN_PORT}/x?case=probe-plain', headers=AUTH, timeout=20)\n"
          "result = f\"{r.status_code} {r.headers.get('X-Belljar-Denied')}\"",
          "403 secret-needs-tls", control="200 None"),
]


# The same table in degraded mode without namespaces (what a default Kubernetes pod allows:
# Landlock, seccomp and rlimits; tests/containment/test_degraded.py runs it under a filter that
# refuses namespaces and mounts). A row not named here holds exactly as above. Each row named
# here either HOLDS (the probe still fails, with the errno Landlock or seccomp gives) or is
# GIVEN_UP (the probe succeeds: the reason says why, and README.md says so too).
HOLDS, GIVEN_UP = "holds", "given up"
RAISED_EACCES = "raised PermissionError [Errno 13]"
RAISED_EPERM = "raised PermissionError [Errno 1]"
DEGRADED_ROWS = {
    "connection file": ("EACCES", HOLDS, "Landlock: outside what the worker may read"),
    "file in the host home": ("EACCES", HOLDS, "Landlock"),
    "/root": ("EACCES", HOLDS, "Landlock"),
    "/home": (RAISED_EACCES, HOLDS, "Landlock: not even listed"),
    "/run and /var": ("EACCES EACCES", HOLDS, "Landlock"),
    "symlink out of the workspace": ("EACCES", HOLDS, "Landlock judges the link's target"),
    "create a dot-file in the workspace": ("EACCES", HOLDS,
                                           "the workspace broker: seccomp user notification needs "
                                           "no namespaces"),
    "make a Python environment's packages": ("EACCES", HOLDS, "the workspace broker"),
    "link to a dot-folder": ("EACCES", HOLDS, "the workspace broker"),
    "hard link": ("EPERM", HOLDS, "seccomp"),
    "make a folder unreadable to the quota": ("EPERM", HOLDS, "the workspace broker"),
    "/etc/shadow": ("EACCES", HOLDS, "Landlock: only the /etc files the jail would bind"),
    "write to /tmp is private": (RAISED_EACCES, HOLDS,
                                 "the host's /tmp is closed; TMPDIR and HOME are a private directory"),
    "no controlling terminal": ("EACCES", HOLDS, "Landlock: /dev is read-only"),
    "block devices": ("EACCES", HOLDS, "Landlock"),
    "capabilities": (lambda out: out.split()[0] == "0" * 16, HOLDS,
                     "no effective capabilities; without a user namespace an unprivileged kernel "
                     "cannot empty the bounding set, and no_new_privs keeps exec from using it"),
    "host loopback TCP": (RAISED_EPERM, HOLDS, "seccomp refuses AF_INET sockets: no network at all"),
    "host loopback IPv6": (RAISED_EPERM, HOLDS, "seccomp refuses AF_INET6 sockets"),
    "UDP to host loopback": (RAISED_EPERM, HOLDS, "seccomp refuses AF_INET sockets"),
    "host abstract unix socket": ("EPERM", HOLDS, "Landlock ABI 6 scopes abstract sockets"),
    "no route out of the sandbox": ("raised PermissionError [Errno 13]", HOLDS,
                                    "no sockets to route: /sys is closed, inet refused"),
    "workspace .env is masked": ("ENOENT", GIVEN_UP,
                                 "nothing can be mounted over it: a workspace holding one is "
                                 "refused at start instead (this table's workspace has none)"),
    "workspace .ssh is masked": ("ENOENT", GIVEN_UP, "as .env: refused at start instead"),
    "host processes in /proc": ("visible", GIVEN_UP,
                                "no pid namespace: the host's processes and their command lines "
                                "are visible (their environments and memory are not)"),
    "/dev has only the safe devices": (lambda out: out != "full null random urandom zero", GIVEN_UP,
                                       "the host's /dev is listed (opened read-only at most, as "
                                       "its permissions allow)"),
}
