"""Input and output: readers, builders, generators, the page store and its cache.

Every module of this package is imported here, so the readers it registers
(:func:`hetgraph.registry.reader`) are known to :func:`read`; their functions are this
package's names and ``__all__``, and ``hetgraph``'s. Adding a format is adding a
decorated reader (in a new module here, or in the module of its kind).
"""

import importlib
import pkgutil

from ..registry import reader_functions as _reader_functions
from .build import build_graph
from .objects import from_arrays, from_networkx, from_pandas, from_scipy
from .readers import detect_format, read
from .store import PageStore, convert, open_store, save

for _module in pkgutil.iter_modules(__path__):  # (the readers register on import)
    importlib.import_module(f"{__name__}.{_module.name}")

#: the registered readers' functions (read_edgelist, read_mtx, ...)
READER_FUNCTIONS = _reader_functions()
globals().update({f.__name__: f for f in READER_FUNCTIONS})

__all__ = [
    "build_graph", "detect_format", "read", "PageStore", "convert", "open_store", "save",
    "from_arrays", "from_networkx", "from_pandas", "from_scipy",
    *(f.__name__ for f in READER_FUNCTIONS),
]
