"""Callbacks that run right after a module is first imported (by anyone, in any cell), and
modules the worker stands in for.

Used to finish IPython integration the moment user code imports IPython, and to route
getpass through the frontend, without importing either module ahead of time. Stand-ins answer
imports of modules whose real code cannot work in the worker (ipykernel: a ZMQ kernel, whose
import alone costs a quarter of a second): the module is built only when something imports it.
"""
import sys


class PostImportHooks:
    def __init__(self, callbacks):
        self.callbacks = dict(callbacks)  # module name -> callable(module)
        self._finding = set()

    def install(self):
        sys.meta_path.insert(0, self)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.callbacks or fullname in self._finding:
            return None
        self._finding.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._finding.discard(fullname)
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _NotifyingLoader(spec.loader, self, fullname)
        return spec

    def loaded(self, fullname, module):
        callback = self.callbacks.pop(fullname, None)  # once: a failed import may be retried
        if callback is not None:
            callback(module)


class _NotifyingLoader:
    def __init__(self, loader, hooks, fullname):
        self._loader = loader
        self._hooks = hooks
        self._fullname = fullname

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        # From here on the module must look exactly as if imported without us.
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        module.__loader__ = self._loader
        self._hooks.loaded(self._fullname, module)


class StandInModules:
    """A finder that answers imports of the given names with modules built by the worker
    (packages, unless named in `modules`)."""

    def __init__(self, builders, modules=()):
        self.builders = dict(builders)  # module name -> callable(module) that fills it in
        self.modules = frozenset(modules)

    def install(self):
        sys.meta_path.insert(0, self)

    def find_spec(self, fullname, path=None, target=None):
        builder = self.builders.get(fullname)
        if builder is None:
            return None
        from importlib.machinery import ModuleSpec
        # A package: the builder may point __path__ at the real package's directory, so the
        # submodules the worker does not replace still import from there.
        return ModuleSpec(fullname, _StandInLoader(builder),
                          is_package=fullname not in self.modules)


class _StandInLoader:
    def __init__(self, builder):
        self._builder = builder

    def create_module(self, spec):
        return None  # the default module object

    def exec_module(self, module):
        self._builder(module)
