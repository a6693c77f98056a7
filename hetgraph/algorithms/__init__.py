"""Built-in vertex programs, each with a one-call function returning a Result.

Every module of this package is imported here; the ones that register an algorithm
(:func:`hetgraph.registry.algorithm`) are exported: their functions and program classes
are this package's names and ``__all__``, the functions also ``hetgraph``'s. Adding an
algorithm is adding one module here.
"""

import importlib
import pkgutil

from ..registry import algorithms as _registered

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

#: the registered one-call functions, exported by ``hetgraph`` as well
FUNCTIONS = [a.function for a in _registered() if a.function.__module__.startswith(__name__)]
_exported = FUNCTIONS + [a.program for a in _registered()
                         if a.program is not None and a.program.__module__.startswith(__name__)]
globals().update({obj.__name__: obj for obj in _exported})
__all__ = [obj.__name__ for obj in _exported]
