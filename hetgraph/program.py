"""VertexProgram: one gather / sum / apply / activate program for the CPU and the GPU.

A program is a class with scalar functions written in plain Python (no NumPy array
tricks, so that the same functions compile with Numba for the CPU and for the GPU)::

    class WidestPath(hg.VertexProgram):
        dtype = np.float64
        reduce = "max"            # the monoid that combines gathered values
        needs_weights = True

        @staticmethod
        def gather(src, weight, dst):     # value pulled along one in-edge
            return min(src, weight)

        @staticmethod
        def apply(old, acc, aux):         # new value from the combined gathers
            return max(old, acc)

        @staticmethod
        def activate(new, old):           # does the change need to propagate?
            return new > old

        def init(self, graph):            # (values, active) arrays of length N
            ...

Per iteration every vertex v that is recomputed gets
``acc = sum(gather(x[u], w[u, v], x[v]) for u -> v)`` (the identity of ``reduce`` when
v has no in-edge), ``x'[v] = apply(x[v], acc, aux[v])`` and is active next iteration
when ``activate(x'[v], x[v])``. Optional hooks run in Python between iterations:
``aux(graph)`` (read-only per-vertex array passed to apply), ``iteration_constant``
(a float computed from all values before each iteration, passed to a four-argument
``apply(old, acc, aux, constant)``), ``converged(graph, previous, values)`` (a global
stopping test; the instance attribute may be set to None to disable it) and
``finalize`` (turns the internal values into the reported ones).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import itertools
import math
import operator
import types

import numpy as np

from . import tuning
from .errors import HetGraphError

MONOIDS = ("add", "min", "max", "or", "and")
VALUE_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.uint32))
BITWISE_MONOIDS = ("or", "and")


class ProgramError(HetGraphError, TypeError):
    """A VertexProgram is malformed: bad signature, monoid, dtype or uncompilable code."""


class VertexProgram:
    """Base class of vertex programs: subclass it, set the attributes, write the hooks.

    Every iteration, each vertex v that is recomputed gets
    ``acc = reduce(gather(x[u], w[u, v], x[v]) for u -> v)`` (the identity of
    ``reduce`` when v has no in-edge), then ``x'[v] = apply(x[v], acc, aux[v])``, and is
    active next iteration when ``activate(x'[v], x[v])``. A run stops when no vertex is
    active, when ``converged`` holds, or at its iteration limit. ``gather``, ``apply``,
    ``activate`` (and ``settled``, ``priority``) are ``@staticmethod`` functions of plain
    scalar Python, compiled with Numba for the CPU and translated to CUDA for the GPU;
    the other hooks run in Python between iterations. See ``docs/vertex-programs.md``.

    Attributes
    ----------
    dtype : numpy dtype, default numpy.float32
        Type of the vertex values and of the accumulators: float32, float64, int32,
        int64 or uint32.
    reduce : str, default "add"
        The monoid that combines the gathered values: "add", "min", "max", "or" or
        "and" (or/and need an integer dtype).
    needs_weights : bool, default False
        ``gather`` receives the edge weight (1.0 on an unweighted graph); otherwise it
        receives 1.0.
    notify_self : bool, default False
        In notify-pull mode, active vertices also recompute themselves. Set it when
        ``apply``'s result depends on the vertex's own old value or on the iteration
        constant, not only on its in-neighbours.
    incremental : bool, default False
        Recomputing a vertex from only the in-neighbours that changed last iteration
        gives what a pull from all of them gives: ``reduce`` is idempotent (min, max,
        or, and), ``apply(old, acc, aux)`` combines old and acc by that monoid, and
        ``gather`` does not read dst. It lets the CPU push along the out-edges of the
        active vertices instead of pulling (the built-in sssp, bfs and
        connected_components set it).
    activates_on_change : bool, default False
        ``activate(new, old)`` is True exactly when new != old (a min relaxation's
        new < old, a max relaxation's new > old): a CPU push then takes every vertex it
        changed as active without calling ``activate``, and keeps no value from before
        the pass. Used with ``incremental`` only; checked on sample values.
    settled : staticmethod or None, default None
        ``settled(value) -> bool``: True when no gather can change a vertex's value any
        more in a sync run (``apply`` would return it as it is, whatever it combines).
        A sync CPU pull then skips that vertex's in-edges (Ligra's ``cond``; what makes
        Beamer's bottom-up BFS cheap), and for an ``incremental`` program stops reading a
        vertex's in-edges at the first one whose gather settles it. Async runs and the GPU kernel ignore it: an
        async value can come from values of the same iteration and still change.
    priority : staticmethod or None, default None
        ``priority(value) -> number``, lower first, for an incremental program: with a
        positive :meth:`bucket_width`, a CPU push or notify-pull iteration runs only the
        active vertices of the lowest bucket [i * width, (i + 1) * width) of
        priorities, the others waiting, still active, for a later one (delta-stepping,
        Meyer and Sanders 2003). The answer is the same fixed point; pulls and the GPU
        run every active vertex.
    converged : method or None, default None
        ``converged(self, graph, previous, values) -> bool``: a global stopping test
        after an iteration, given the values before and after it (None: none; the run
        always stops when no vertex is active).
    change_test : method or None, default None
        ``change_test(self, graph, values) -> (weights, limit) or None`` for a program
        whose ``converged`` is ``sum |values - previous| * weights < limit``: those
        (``weights`` float64 on the device of ``values``, ``limit`` a number), so that a
        GPU in sync mode makes the test on the device while the next iteration is
        already queued (no wait between iterations); None: ``converged`` is called after
        each iteration, the next launched once it has returned.
    iteration_constant : method, optional
        ``iteration_constant(self, graph, values) -> float``: not defined by default.
        Define it and give ``apply`` a fourth parameter to receive it; it is computed
        from all values before each iteration.
    derived : method, optional
        ``derived(self, graph)``: arrays the program derives from the graph alone and
        keeps there (``graph.kept``), made again by ``init`` when missing. Not defined
        by default; where defined, a process's first run makes them in a thread while
        it imports its scheduler (PageRank's dangling set and scales).
    init_side_effects : bool, default True
        ``init`` sets what ``aux`` or ``finalize`` read (beyond what ``derived`` sets).
        Set it False when ``init`` only returns its arrays, the same for the same
        attributes and graph: a run whose worker processes make the initial state
        themselves then does not call ``init`` in the calling process, which builds
        no V-sized arrays for it (it calls ``derived``, when defined, then ``aux``),
        and a worker fills the next run's state from the one it made while the
        program's attributes stay the same; the built-in programs set it. Where the
        hooks also take ``xp``, a GPU worker process then finalizes the run's result
        on its device with its copy of the program: ``finalize`` must read only the
        graph, the values and the program's attributes, and change only the values.

    Examples
    --------
    Which vertices vertex 0 reaches, as 1s (an undirected 3 x 3 grid: all nine):

    >>> import numpy as np
    >>> import hetgraph as hg
    >>> class Reach(hg.VertexProgram):
    ...     dtype = np.int32
    ...     reduce = "max"
    ...     incremental = True
    ...     activates_on_change = True
    ...
    ...     @staticmethod
    ...     def gather(src, weight, dst):
    ...         return src
    ...
    ...     @staticmethod
    ...     def apply(old, acc, aux):
    ...         return max(old, acc)
    ...
    ...     @staticmethod
    ...     def activate(new, old):
    ...         return new > old
    ...
    ...     def init(self, graph):
    ...         values = np.zeros(graph.num_vertices, np.int32)
    ...         values[0] = 1
    ...         return values, values == 1
    >>> result = hg.run(Reach(), hg.generate.grid(3, 3))
    >>> int(result.values.sum())
    9
    """

    dtype = np.float32
    reduce = "add"
    needs_weights = False
    notify_self = False
    incremental = False
    activates_on_change = False
    init_side_effects = True

    @staticmethod
    def gather(src, weight, dst):
        """The value pulled along one in-edge u -> v (required).

        Parameters
        ----------
        src : scalar of ``dtype``
            The in-neighbour u's value.
        weight : float
            The edge's weight (1.0 unless ``needs_weights`` and the graph is weighted).
        dst : scalar of ``dtype``
            This vertex v's own value.

        Returns
        -------
        scalar of ``dtype``
            What ``reduce`` combines over v's in-edges.
        """
        raise NotImplementedError

    @staticmethod
    def apply(old, acc, aux):
        """A vertex's new value from its combined gathers (required).

        Parameters
        ----------
        old : scalar of ``dtype``
            The vertex's value.
        acc : scalar of ``dtype``
            The ``reduce`` of its gathers (the monoid's identity without in-edges).
        aux : scalar
            The vertex's entry of :meth:`aux` (0 when there is none). A fourth
            parameter, if declared, receives ``iteration_constant``.

        Returns
        -------
        scalar of ``dtype``
            The new value.
        """
        raise NotImplementedError

    @staticmethod
    def activate(new, old):
        """Whether a vertex's change must reach its out-neighbours (required).

        Parameters
        ----------
        new, old : scalar of ``dtype``
            The vertex's value after and before ``apply``.

        Returns
        -------
        bool
            True: the vertex is active next iteration.
        """
        raise NotImplementedError

    def init(self, graph):
        """The initial state (required).

        A program may declare ``init(self, graph, xp=numpy)`` and build its arrays with
        the array module ``xp``: then, when its ``aux`` and ``finalize`` take ``xp``
        too (the defaults do), a run on one GPU builds its state there (``xp`` is
        CuPy) and copies only the final values to the host.

        Parameters
        ----------
        graph : hetgraph.Graph
            The graph of the run.

        Returns
        -------
        (values, active)
            ``values``: an array of length N castable to ``dtype``; ``active``: a bool
            array of length N (the vertices active in the first iteration), or None
            for all.
        """
        raise NotImplementedError

    def aux(self, graph, xp=np):
        """A read-only per-vertex array passed to :meth:`apply` (optional).

        Parameters
        ----------
        graph : hetgraph.Graph
            The graph of the run.
        xp : module, default numpy
            The array module to build it with (see :meth:`init`).

        Returns
        -------
        array or None
            A numeric array of length N, or None (the default: apply receives 0).
        """
        return None

    converged = None
    change_test = None
    settled = None
    priority = None

    def bucket_width(self, graph):
        """The width of a priority bucket for ``graph`` (optional; see ``priority``).

        Read once a run.

        Parameters
        ----------
        graph : hetgraph.Graph
            The graph of the run.

        Returns
        -------
        float or None
            A positive number; None (the default) or inf: no buckets.
        """
        return None

    def finalize(self, graph, values, xp=np):
        """The reported values from the internal ones (optional).

        Parameters
        ----------
        graph : hetgraph.Graph
            The graph of the run.
        values : array
            The run's own final array: finalize may change and return it. An array of
            ``xp`` (CuPy for a state kept on a GPU, see :meth:`init`).
        xp : module, default numpy
            The array module of ``values``.

        Returns
        -------
        array
            The values the result reports (default: ``values`` unchanged).
        """
        return values

    @property
    def name(self) -> str:
        """The program's name in messages and the history (its class name)."""
        return type(self).__name__


_NOT_PLAIN = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD,
              inspect.Parameter.KEYWORD_ONLY)


_SCALARS = (bool, int, float, str, bytes, type(None), np.dtype, np.generic, slice)
# the scalars a loose key holds as they are (hashable: a slice is not, before Python 3.12)
_HASHABLE = (bool, int, float, str, bytes, type(None), np.dtype, np.number, np.bool_)
_PLAIN = frozenset((bool, int, float, str, type(None)))  # a program's attributes keyed
# as they are, without a call (the calibration key is taken every warm call)


def kept_apart(value) -> bool:
    """Whether ``value`` is an array that a run packed for worker processes refers to by
    key instead of carrying it (:func:`hetgraph.scheduler.tasks.pack`): a NumPy array
    (no subclass) of ``tuning.KEPT_ARRAY_BYTES`` or more, C-contiguous, of no objects.
    A pack finds such an array kept again by its contents (``Cluster.kept_array``)."""
    return type(value) is np.ndarray and value.nbytes >= tuning.KEPT_ARRAY_BYTES and \
        not value.dtype.hasobject and value.flags.c_contiguous


def key_part(value, by_identity=False, digest=None):
    """``value`` as a part of a key of what a process reuses for equal keys.

    Strict (``digest`` None: :meth:`ProgramSpec.initial_key`, a packed run's plan
    (:func:`hetgraph.scheduler.tasks.plan_key`), where a stale match would be a wrong
    answer): numbers (a float with its sign: 0.0 and -0.0 differ), strings, bytes,
    dtypes and slices by value; tuples, lists and dicts by their items; an array kept
    apart (:func:`kept_apart`) by identity, any other by its bytes (an array of
    objects has no key); anything else by identity with ``by_identity``, else no key.
    None: no key, nor for what holds ``value``.
    An array changed in place between two runs is seen: the plan that found a kept
    apart array by identity compares its contents with the copy the workers hold before
    it is reused (``Cluster.kept_array``), and the workers' kept copies are written by
    nothing. An array changed while a run is under way is not supported.

    Loose (``digest(array)`` given: the calibration key, where a stale match costs
    speed, never an answer, and reading a large array whole every warm call would
    cost more than it saves): an array by ``digest``, a number, string or dtype by
    value, tuples, lists and dicts by their items, anything else by its class; never
    None, always hashable."""
    if isinstance(value, np.ndarray):
        if digest is not None:
            return ("array", value.dtype.str, value.shape, digest(value))
        if kept_apart(value):
            return _Same(value)
        return None if value.dtype.hasobject else \
            ("array", type(value), value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (tuple, list, dict)):  # (a dict by its (key, value) pairs)
        items = value.items() if isinstance(value, dict) else value
        parts = tuple([key_part(v, by_identity, digest) for v in items])
        return None if any(p is None for p in parts) else (type(value),) + parts
    if isinstance(value, _HASHABLE if digest is not None else _SCALARS):
        return ("value", type(value), _signed(value))
    if digest is not None:
        return type(value)
    return _Same(value) if by_identity else None


def _signed(value):
    """``value`` as a key holds it: a float with its sign (0.0 and -0.0 are equal
    numbers and different parameters)."""
    if type(value) is float:
        return value, math.copysign(1.0, value)
    return (value, bool(np.signbit(value))) if isinstance(value, np.floating) else value


class _Same:
    """Equal to a _Same of the same object only (an array kept apart, an object, in a
    key)."""

    __slots__ = ("obj",)
    __hash__ = None

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return isinstance(other, _Same) and other.obj is self.obj


def _takes_xp(fn) -> bool:
    """Whether ``fn`` has a parameter named ``xp`` (an array module, see
    :meth:`VertexProgram.init`); a bound method's answer is its function's, kept
    (inspect is slow next to a small run)."""
    function = getattr(fn, "__func__", None)
    if function is None:
        return _has_xp(fn)
    try:
        return _has_xp_kept(function)
    except TypeError:  # (unhashable)
        return _has_xp(function)


def _has_xp(fn) -> bool:
    try:
        return "xp" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


_has_xp_kept = functools.lru_cache(maxsize=256)(_has_xp)


def _parameter_kinds(fn):
    """The kinds of ``fn``'s parameters, or None when inspect cannot tell."""
    try:
        return tuple(p.kind for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None


def _user_function(program, name, arities):
    """(the program's function ``name``, its argument count), checked."""
    cls = type(program)
    fn = getattr(cls, name, None)
    try:
        return _checked_function(cls, program.name, name, fn, arities)
    except TypeError:  # an unhashable attribute: not a function
        return _checked_function.__wrapped__(cls, program.name, name, fn, arities)


@functools.lru_cache(maxsize=256)
def _checked_function(cls, program, name, fn, arities):
    """:func:`_user_function`'s checks, kept (a run checks its program each time, and
    inspect is slow next to a small run); keyed by the function itself, so that a class
    given another function is checked again. ``program``: the program's name."""
    if fn is None or not callable(fn):
        raise ProgramError(f"{program}.{name} is missing; define it as a @staticmethod")
    if getattr(VertexProgram, name) is fn:
        raise ProgramError(f"{program}.{name} is not defined; write it as a "
                           f"@staticmethod taking {arities[0]} arguments")
    if not isinstance(inspect.getattr_static(cls, name), staticmethod):
        raise ProgramError(f"{program}.{name} must be a @staticmethod (it cannot use "
                           f"self: pass per-vertex data through aux, constants as globals)")
    kinds = _parameter_kinds(fn)
    if kinds is None:
        return fn, arities[0]
    if any(kind in _NOT_PLAIN for kind in kinds):
        raise ProgramError(f"{program}.{name} must take plain positional arguments")
    count = len(kinds)
    if count not in arities:
        wanted = " or ".join(str(a) for a in arities)
        raise ProgramError(f"{program}.{name} takes {count} arguments; it must take "
                           f"{wanted} ({_SIGNATURES[name]})")
    return fn, count


_SIGNATURES = {
    "gather": "src_value, edge_weight, dst_value",
    "apply": "old, acc, aux[, constant]",
    "activate": "new, old",
    "settled": "value",
    "priority": "value",
}


@functools.lru_cache(maxsize=256)
def _check_activates_on_change(program, activate, dtype, reduce):
    """activate(combine(old, g), old) must be (combine(old, g) != old) for sample values
    old and g of ``dtype`` (the monoid's identity among them); kept per function
    (checking the samples costs more than a small run). ``program``: the program's
    name."""
    samples = [0, 1, 2, 3, 100, _identity(dtype, reduce).item()]
    if dtype.kind != "u":
        samples += [-1, -100]
    if dtype.kind == "f":
        samples += [0.001, 1.0001, 2.5]
    combine = {"min": min, "max": max, "or": operator.or_, "and": operator.and_}[reduce]
    for old, given in itertools.product(samples, repeat=2):
        new, old = dtype.type(combine(old, given)), dtype.type(old)
        try:
            active = bool(activate(new, old))
        except Exception as exc:
            raise ProgramError(f"{program}.activate({new}, {old}) raised "
                               f"{type(exc).__name__}: {exc}") from None
        if active != (new != old):
            raise ProgramError(f"{program}.activates_on_change is set but activate({new}, "
                               f"{old}) is {active}, not {not active}; unset "
                               f"activates_on_change")


def _identity(dtype, reduce):
    """The identity of the monoid ``reduce`` in ``dtype`` (a NumPy scalar)."""
    kind = dtype.kind
    if reduce == "add" or reduce == "or":
        return dtype.type(0)
    if reduce == "and":
        return dtype.type(np.iinfo(dtype).max if kind == "u" else -1)
    if kind == "f":
        return dtype.type(np.inf if reduce == "min" else -np.inf)
    info = np.iinfo(dtype)
    return dtype.type(info.max if reduce == "min" else info.min)


class ProgramSpec:
    """A checked program: its functions, dtype, monoid and which optional hooks it uses."""

    def __init__(self, program):
        if isinstance(program, type):
            raise ProgramError(f"pass an instance of {program.__name__}, not the class "
                               f"(write {program.__name__}())")
        if not isinstance(program, VertexProgram):
            raise ProgramError(f"{type(program).__name__} is not a hetgraph.VertexProgram; "
                               f"subclass hg.VertexProgram")
        self.program = program
        self._check_values(program)
        self._check_functions(program)
        self._check_flags(program)

    def _check_values(self, program):
        """``dtype`` and ``reduce``: a supported dtype, a monoid that fits it."""
        try:
            self.dtype = np.dtype(program.dtype)
        except TypeError as exc:
            raise ProgramError(f"{program.name}.dtype={program.dtype!r} is not a dtype") from exc
        if self.dtype not in VALUE_DTYPES:
            names = ", ".join(str(d) for d in VALUE_DTYPES)
            raise ProgramError(f"{program.name}.dtype={self.dtype} is not supported; "
                               f"use one of {names}")
        self.reduce = program.reduce
        if self.reduce not in MONOIDS:
            raise ProgramError(f"{program.name}.reduce={self.reduce!r} is not a monoid; "
                               f"use one of {', '.join(MONOIDS)}")
        if self.reduce in BITWISE_MONOIDS and self.dtype.kind == "f":
            raise ProgramError(f"{program.name}.reduce={self.reduce!r} needs an integer "
                               f"dtype, not {self.dtype}")

    def _check_functions(self, program):
        """The static functions' signatures, and the hooks they call for."""
        self.gather, _ = _user_function(program, "gather", (3,))
        self.apply, apply_arity = _user_function(program, "apply", (3, 4))
        self.activate, _ = _user_function(program, "activate", (2,))
        self.settled = None if program.settled is None else \
            _user_function(program, "settled", (1,))[0]
        self.priority = None if program.priority is None else \
            _user_function(program, "priority", (1,))[0]
        if self.priority is not None and not program.incremental:
            raise ProgramError(f"{program.name}.priority is set but the program is not "
                               f"incremental: the order of its updates can change its "
                               f"answer; set incremental = True or remove priority")
        self.uses_constant = apply_arity == 4
        has_constant = callable(getattr(program, "iteration_constant", None))
        if self.uses_constant and not has_constant:
            raise ProgramError(f"{program.name}.apply takes a constant but the program has "
                               f"no iteration_constant(graph, values) method")
        if has_constant and not self.uses_constant:
            raise ProgramError(f"{program.name} defines iteration_constant but apply takes "
                               f"3 arguments; add a fourth parameter to receive it")

    def _check_flags(self, program):
        """The flags, and that ``incremental`` and ``activates_on_change`` hold."""
        self.has_converged = callable(program.converged)
        # whether a run may build the state with another array module and finish there
        self.any_device = all(_takes_xp(getattr(program, hook))
                              for hook in ("init", "aux", "finalize"))
        self.needs_weights = bool(program.needs_weights)
        # whether the initial state may be made elsewhere alone (see initial_aux)
        self.init_apart = not program.init_side_effects
        self.notify_self = bool(program.notify_self)
        self.incremental = bool(program.incremental)
        if self.incremental and (self.reduce == "add" or self.notify_self or
                                 self.uses_constant):
            why = "reduce='add' is not idempotent" if self.reduce == "add" else \
                "notify_self says apply reads more than the in-neighbours" \
                if self.notify_self else "apply takes an iteration constant"
            raise ProgramError(f"{program.name}.incremental is set but {why}; unset it "
                               f"(the CPU then pulls instead of pushing)")
        # (only a push uses it: a program made not incremental keeps its flag unchecked)
        self.activates_on_change = bool(program.activates_on_change) and self.incremental
        if self.activates_on_change:
            _check_activates_on_change(program.name, self.activate, self.dtype,
                                       self.reduce)

    @property
    def name(self):
        return self.program.name

    def bucket_width(self, graph) -> float:
        """The program's priority bucket width for ``graph``, checked: 0.0 when it has no
        priority or no buckets (see :class:`VertexProgram`)."""
        if self.priority is None:
            return 0.0
        given = self.program.bucket_width(graph)
        if given is None:
            return 0.0
        try:
            width = float(given)
        except (TypeError, ValueError):
            width = float("nan")
        if not width > 0:
            raise ProgramError(f"{self.name}.bucket_width returned {given!r}; it must be a "
                               f"positive number (None or inf: no buckets)")
        return 0.0 if width == float("inf") else width

    def code_key(self):
        """A hex digest of everything the program's compiled CPU code depends on: the
        code of its functions and what they read (see :func:`function_digest`), its
        dtype, monoid and the flags compiled in; None when a function reads a value
        that has no stable description (its compiled code is then not kept on disk)."""
        try:
            functions = [None if fn is None else function_digest(fn) for fn in
                         (self.gather, self.apply, self.activate, self.settled,
                          self.priority)]
        except UnstableValue:
            return None
        return _sha256(repr((functions, self.dtype.str, self.reduce, self.uses_constant,
                             self.activates_on_change, self.incremental)))

    def identity(self):
        """The monoid's identity in the program's dtype."""
        return _identity(self.dtype, self.reduce)

    def initial_state(self, graph, xp=np):
        """Checked (values, active, aux) arrays for ``graph``, built with the array module
        ``xp`` (another than NumPy only when :attr:`any_device`)."""
        n = graph.num_vertices
        on = {} if xp is np else {"xp": xp}
        result = self.program.init(graph, **on)
        if not isinstance(result, tuple) or len(result) != 2:
            raise ProgramError(f"{self.name}.init must return (values, active), "
                               f"got {type(result).__name__}")
        values, active = result
        values = xp.asarray(values)
        if values.shape != (n,):
            raise ProgramError(f"{self.name}.init returned values of shape {values.shape}; "
                               f"the graph has {n} vertices")
        if not np.can_cast(values.dtype, self.dtype, "same_kind"):
            raise ProgramError(f"{self.name}.init returned {values.dtype} values but the "
                               f"program's dtype is {self.dtype}; convert them or change dtype")
        values = xp.array(values, dtype=self.dtype)  # a copy: runs write into it
        if active is None:
            flags = xp.ones(n, np.uint8)
        else:
            active = xp.asarray(active)
            if active.shape != (n,) or active.dtype.kind not in "bui":
                raise ProgramError(f"{self.name}.init returned active of shape {active.shape}"
                                   f" and dtype {active.dtype}; it must be a bool array of "
                                   f"length {n} or None")
            flags = (active != 0).view(np.uint8)  # a new array: no copy
        return values, flags, self._checked_aux(graph, xp)

    def key(self, graph, digest=None):
        """What tells this program apart from others within this process: its class
        first, its dtype, monoid and functions, then each of its attributes (``vars``)
        as it is now, by :func:`key_part` (``graph`` itself as "graph"); a class
        attribute changed on the class is not seen. Two programs of equal strict
        keys (``digest`` None) are the same program with the same parameters; None
        where an attribute has no strict key. With ``digest(array)``, the loose key
        (:func:`key_part`: the dispatcher's calibration key, which must be cheap)."""
        program = self.program
        parts = [type(program), self.dtype, self.reduce, self.gather, self.apply,
                 self.activate]
        plain = _PLAIN
        for name, value in vars(program).items():
            if type(value) in plain:  # (1, 1.0 and True are equal: the type tells)
                parts.append((name, type(value), _signed(value)))
                continue
            part = ("graph",) if value is graph else key_part(value, False, digest)
            if part is None:
                return None
            parts.append((name, part))
        return tuple(parts)

    def initial_key(self, graph):
        """A key of the program's initial state on ``graph``: two programs of equal keys
        make the same initial state on it. The strict :meth:`key`, its class first;
        None where it has none, or where ``init`` may have side effects
        (:attr:`init_apart` False)."""
        return self.key(graph) if self.init_apart else None

    def initial_aux(self, graph):
        """The checked aux array (NumPy, or None) for ``graph`` without the initial
        values and flags, for a run whose workers make those themselves: the program's
        ``derived`` arrays made first (what its ``aux`` may read). Only for a program
        whose ``init`` has no side effects (:attr:`init_apart`)."""
        if not self.init_apart:
            raise ProgramError(f"{self.name}.init may set what aux reads "
                               f"(init_side_effects is True): call initial_state")
        self.derived_arrays(graph)
        return self._checked_aux(graph, np)

    def derived_arrays(self, graph):
        """The NumPy arrays among what the program's ``derived(graph)`` returns (made,
        or found kept by the graph); () when it defines none. The graph keeps them and
        nothing writes them: the same object has the same contents."""
        derived = getattr(self.program, "derived", None)
        if not callable(derived):
            return ()
        made = derived(graph)
        made = made if isinstance(made, (tuple, list)) else (made,)
        return tuple(a for a in made if isinstance(a, np.ndarray))

    def _checked_aux(self, graph, xp):
        """The program's aux for ``graph`` built with ``xp``, checked (None: none)."""
        n = graph.num_vertices
        aux = self.program.aux(graph, **({} if xp is np else {"xp": xp}))
        if aux is not None:
            aux = xp.asarray(aux)
            if aux.shape != (n,) or aux.dtype.kind not in "buif":
                raise ProgramError(f"{self.name}.aux must return a numeric array of length "
                                   f"{n}, got shape {aux.shape} and dtype {aux.dtype}")
            aux = xp.ascontiguousarray(aux)
        return aux


class UnstableValue(Exception):
    """A value a function reads that has no description stable across processes."""


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def function_digest(fn) -> str:
    """A hex digest of what a compiled function's machine code depends on, stable
    across processes: its bytecode and constants (nested code objects too), and the
    values of the globals (module attributes it names included) and closure cells it
    reads: numbers and strings by value, arrays by content, functions and jitted
    functions by their own digest, modules and classes by name. Raises
    :class:`UnstableValue` for any other value (an object whose contents Numba could
    freeze into the code but this digest would not see)."""
    return _sha256(repr(_function_description(fn, set())))


def _function_description(fn, visiting):
    fn = getattr(fn, "py_func", fn)  # a jitted function: its Python function
    code = getattr(fn, "__code__", None)
    if code is None:  # a callable object: what it runs is not in sight
        raise UnstableValue(type(fn).__qualname__)
    if code in visiting:  # recursion: named, not expanded again
        return ("recursive", code.co_name)
    visiting = visiting | {code}
    names, codes = set(), [code]
    while codes:
        c = codes.pop()
        names.update(c.co_names)
        codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    scope = fn.__globals__
    described = []
    for name in sorted(names):
        if name in scope:
            value = scope[name]
            described.append((name, _describe(value, visiting)))
            if isinstance(value, types.ModuleType):  # the module's names it may read
                described.extend((f"{name}.{n}", _describe_attribute(value, n))
                                 for n in sorted(names) if n in vars(value))
    cells = tuple(_describe(c.cell_contents, visiting) for c in fn.__closure__ or ())
    return (_code_description(code), tuple(described), cells)


def _code_description(code):
    return (code.co_code, code.co_argcount, code.co_names, code.co_varnames,
            tuple(_constant(k) for k in code.co_consts))


def _constant(value):
    """A code constant's description: a set's members sorted (the order of a set of
    strings changes with each process's hash seed)."""
    if isinstance(value, types.CodeType):
        return _code_description(value)
    if isinstance(value, tuple):
        return tuple(_constant(v) for v in value)
    if isinstance(value, frozenset):
        return ("frozenset", tuple(sorted(repr(_constant(v)) for v in value)))
    return (type(value).__name__, repr(value))


def _describe_attribute(module, name):
    """A module attribute's description: a plain value by value, anything else by its
    name (a library's functions are not expanded: their code is the library's)."""
    try:
        return _describe(vars(module)[name], None)
    except UnstableValue:
        return ("attribute", module.__name__, name)


def _describe(value, visiting):
    """A value's stable description (see :func:`function_digest`); ``visiting``: the
    code objects being described (None: a function is not expanded)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes,
                                           np.generic, np.dtype)):
        return (type(value).__name__, repr(value))
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape,
                hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest())
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_describe(v, visiting) for v in value))
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    if isinstance(value, type):
        return ("class", value.__module__, value.__qualname__)
    if visiting is not None and (isinstance(value, types.FunctionType) or
                                 hasattr(value, "py_func")):
        return ("function", _function_description(value, visiting))
    if isinstance(value, (types.BuiltinFunctionType, np.ufunc)):
        return ("builtin", getattr(value, "__module__", None), value.__name__)
    raise UnstableValue(type(value).__qualname__)
