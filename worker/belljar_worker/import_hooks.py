"""Callbacks that run right after a module is first imported (by anyone, in any cell).

Used to finish IPython integration the moment user code imports IPython, and to route
getpass through the frontend, without importing either module ahead of time.
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
