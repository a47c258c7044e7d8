#include "sandbox/layers/host_modules.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace belljar {

namespace {

// Whitespace-separated; tests/integration/test_host_modules.py reads this literal.
constexpr std::string_view kHostModules = R"names(
IPython PIL __future__ _abc _aix_support _apple_support _ast _asyncio _bisect _blake2
_bootlocale _bootsubprocess _bz2 _codecs _codecs_cn _codecs_hk _codecs_iso2022 _codecs_jp
_codecs_kr _codecs_tw _collections _collections_abc _colorize _compat_pickle _compression
_contextvars _crypt _csv _ctypes _curses _curses_panel _datetime _dbm _decimal _distutils_hack
_elementtree _frozen_importlib _frozen_importlib_external _functools _gdbm _hashlib _heapq _imp
_interpchannels _interpqueues _interpreters _io _ios_support _json _locale _lsprof _lzma
_markupbase _md5 _msi _multibytecodec _multiprocessing _opcode _opcode_metadata _operator
_osx_support _overlapped _pickle _posixshmem _posixsubprocess _py_abc _pydecimal _pydev_bundle
_pydev_runfiles _pydevd_bundle _pydevd_bundle_ext _pydevd_frame_eval _pydevd_sys_monitoring
_pyio _pyrepl _queue _random _remote_debugging _scproxy _sha1 _sha256 _sha3 _sha512 _signal
_sitebuiltins _socket _sqlite3 _sre _ssl _stat _statistics _string _strptime _struct
_suggestions _symtable _sysconfig _thread _threading_local _tkinter _tokenize _tracemalloc
_typeshed _typing _uuid _warnings _weakref _weakrefset _winapi _zoneinfo _zstd abc aifc
annotationlib antigravity appnope argcomplete argparse array arrow ast astroid asttokens
asynchat asyncio asyncore atexit atomicwrites attr attrs audioop autoreload backcall base64 bdb
binascii binhex bisect builtins bz2 cProfile calendar cgi cgitb chunk cmath cmd code codecs
codeop collections colorama colorsys comm compileall compression concurrent configparser
contextlib contextvars contourpy copy copyreg crypt csv ctags ctypes curses cycler dataclasses
datetime dateutil dbm debugpy decimal decorator difflib dis distutils django doctest email
encodings ensurepip entrypoints enum errno exceptiongroup executing fastjsonschema faulthandler
fcntl filecmp fileinput fnmatch fontTools formatter fqdn fractions ftplib functools gc
genericpath getopt getpass gettext glob graphlib grp gzip hashlib heapq hmac html http idlelib
idna imaplib imghdr imp importlib importlib_metadata inspect interegular io ipaddress ipykernel
ipykernel_launcher ipython_genutils isoduration itertools java jedi json jsonpointer jsonschema
jsonschema_specifications jupyter_client jupyter_core keyword kiwisolver lark lib2to3 linecache
locale logging lzma macpath mailbox mailcap marshal math matplotlib matplotlib_inline mimetypes
mmap modulefinder mpl_toolkits msgpack msilib msvcrt multiprocessing nbformat nest_asyncio netrc
nis nntplib nt ntpath nturl2path numbers numpy numpydoc opcode operator optparse org orjson os
os2emxpath ossaudiodev packaging parser parso pathlib pdb pexpect pickle pickleshare pickletools
pip pipes pkg_resources pkgutil platform platformdirs plistlib poplib posix posixpath pprint
profile prompt_toolkit pstats psutil pty ptyprocess pure_eval pwd py_compile pyclbr
pydev_ipython pydevconsole pydevd pydevd_file_utils pydevd_plugins pydevd_tracing pydoc
pydoc_data pyexpat pygments pyparsing queue quopri random re readline referencing regex reprlib
resource rfc3339_validator rfc3986_validator rfc3987 rfc3987_syntax rlcompleter rpds runpy sched
secrets select selectors setuptools shelve shlex shutil signal site sitecustomize six smtpd
smtplib sndhdr socket socketserver socks spwd sqlite3 sre_compile sre_constants sre_parse ssl
stack_data stat statistics storemagic string stringprep struct subprocess sunau symbol symtable
sys sysconfig syslog tabnanny tarfile telnetlib tempfile termios textwrap this thread threading
time timeit tkinter token tokenize tomli tomllib tornado trace traceback tracemalloc traitlets
tty turtle turtledemo types typing typing_extensions unicodedata unittest uri_template urllib
urllib3_secure_extra usercustomize uu uuid uv venv warnings wave wcwidth weakref webbrowser
webcolors wheel winreg winsound wsgiref xdrlib xml xmlrpc zipapp zipfile zipimport zipp zlib zmq
zoneinfo
)names";

// Standard-library modules and packages in every Python from 3.10 to 3.14, in Debian's python3
// itself (not split into a package of their own, as distutils, lib2to3, tkinter and venv's
// ensurepip are), whose names projects give folders.
constexpr std::string_view kHarmlessFolders[] = {
    "calendar", "code",    "collections", "csv",     "email",  "html",  "http",
    "json",     "logging", "queue",       "secrets", "string", "types", "xml"};

// sysconfig imports _sysconfigdata_<abiflags>_<platform>_<multiarch>, a name per build.
constexpr std::string_view kPrefixes[] = {"_sysconfigdata_"};

const std::vector<std::string_view>& sorted_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    size_t at = 0;
    while (at < kHostModules.size()) {
      size_t start = kHostModules.find_first_not_of(" \n", at);
      if (start == std::string_view::npos) break;
      size_t end = kHostModules.find_first_of(" \n", start);
      if (end == std::string_view::npos) end = kHostModules.size();
      out.push_back(kHostModules.substr(start, end - start));
      at = end;
    }
    std::sort(out.begin(), out.end());
    return out;
  }();
  return names;
}

}  // namespace

bool host_module_name(std::string_view name) {
  for (auto prefix : kPrefixes)
    if (name.substr(0, prefix.size()) == prefix) return true;
  const auto& names = sorted_names();
  return std::binary_search(names.begin(), names.end(), name);
}

bool plain_folder_harmless(std::string_view name) {
  return std::find(std::begin(kHarmlessFolders), std::end(kHarmlessFolders), name) !=
         std::end(kHarmlessFolders);
}

std::string_view module_of(std::string_view entry) {
  if (entry.empty() || entry.front() == '.') return {};
  auto dot = entry.find('.');
  if (dot == std::string_view::npos) return entry;
  std::string_view stem = entry.substr(0, dot), suffix = entry.substr(dot);
  // Python's loaders: source, bytecode without its source, and extension modules, whose
  // suffix may carry an ABI tag (".cpython-311-x86_64-linux-gnu.so", ".abi3.so").
  if (suffix == ".py" || suffix == ".pyc") return stem;
  if (suffix.size() >= 3 && suffix.substr(suffix.size() - 3) == ".so") return stem;
  return {};
}

}  // namespace belljar
