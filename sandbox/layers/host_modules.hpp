#pragma once
// Module names a host Python imports from the folder it was started in: a stock Jupyter kernel
// (`python -m ipykernel_launcher`, which JupyterLab starts with the notebook's folder as its
// working directory), `python -m pip`, `python -i` and any `python -m`/`-c` put that folder
// first on sys.path, ahead of the standard library and site-packages. A `zmq.py`, `json/`
// package or `ipykernel_launcher.py` the sandbox left in a notebook's folder would run as the
// host user the next time such a Python starts there (the outside attack on round three:
// `ipykernel_launcher.py`, `readline.py`, `pip.py`). The workspace rule (workspace_rule.hpp)
// refuses, at any depth, a module or package of one of these names.
//
// The names: the standard library's (sys.stdlib_module_names, with those of the versions before
// and after it), and every top-level name a stock ipykernel, pip and the REPL look for as they
// start, run a cell, complete and inspect, optional imports that fail included (`orjson`,
// `django`, `java`). tests/integration/test_host_modules.py records those lookups from the
// installed ipykernel and fails on a name this table lacks.
#include <string_view>

namespace belljar {

// Whether `name` (a top-level module name: no dots) is one a host Python imports at start.
bool host_module_name(std::string_view name);

// Whether a plain folder (no `__init__`) of this name is harmless: a namespace portion yields to
// the real module only when there is one, so only standard-library names present in every
// Python belljar supports, and common as a project's folder names, are listed (`code`, `json`,
// `html`, `email`, `logging`, ...). A folder named after an optional import that is absent
// (`numpydoc`, whose `docscrape` jedi imports on completion, in the outside attack on round
// three) would be the package itself.
bool plain_folder_harmless(std::string_view name);

// The module name a file or folder named `entry` would be imported as from its folder, when it
// has a module's shape: `N.py`, `N.pyc`, `N.so` and `N.<abi tag>.so` give N; a folder (or
// anything else without a suffix) named N gives N; "" for any other shape.
std::string_view module_of(std::string_view entry);

}  // namespace belljar
