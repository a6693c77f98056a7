"""Translate a VertexProgram's scalar Python functions into CUDA C++ device functions.

The GPU runs the same ``gather`` / ``apply`` / ``activate`` the CPU compiles with Numba.
This module reads their source (``inspect``), walks the Python syntax tree and writes
one ``__device__`` function each, typing every expression as Numba does, so that both
devices compute the same thing:

* integers combine to int64 (uint64 when both are unsigned); a float with an integer
  gives float64; float32 stays float32 only with float32 or bool; ``/`` of integers is
  float64; ``//`` and ``%`` follow Python (floor, sign of the divisor);
* ``min``/``max``/``abs``, ``float``/``int``/``bool``, the ``math`` functions, the
  NumPy scalar types (``np.float32(x)`` ...) and the NumPy ufuncs of one or two scalars,
  numeric globals and closure constants (inlined), ``if``/``elif``/``else``, assignments,
  conditional expressions, chained comparisons, ``and``/``or``/``not`` on booleans.

Anything else (loops, calls to other functions, arrays, attributes of objects) is a
:class:`~hetgraph.program.ProgramError` naming the function and the line.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math
import textwrap

import numpy as np

from ..program import ProgramError

BOOL = np.dtype(np.bool_)
INT64 = np.dtype(np.int64)
UINT64 = np.dtype(np.uint64)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)

C_TYPES = {
    np.dtype(np.bool_): "bool", np.dtype(np.int8): "signed char",
    np.dtype(np.uint8): "unsigned char", np.dtype(np.int16): "short",
    np.dtype(np.uint16): "unsigned short", np.dtype(np.int32): "int",
    np.dtype(np.uint32): "unsigned int", np.dtype(np.int64): "long long",
    np.dtype(np.uint64): "unsigned long long", np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}

# helpers the generated functions call (Python semantics for //, %, **, min, max, ...)
PRELUDE = r"""
#define HG_INF_F __int_as_float(0x7f800000)
#define HG_NAN_F __int_as_float(0x7fc00000)
#define HG_INF __longlong_as_double(0x7ff0000000000000LL)
#define HG_NAN __longlong_as_double(0x7ff8000000000000LL)
template <typename T> __device__ __forceinline__ T hg_min(T a, T b) { return b < a ? b : a; }
template <typename T> __device__ __forceinline__ T hg_max(T a, T b) { return b > a ? b : a; }
template <typename T> __device__ __forceinline__ T hg_npmin(T a, T b)
{ return a != a ? a : (b != b ? b : (b < a ? b : a)); }
template <typename T> __device__ __forceinline__ T hg_npmax(T a, T b)
{ return a != a ? a : (b != b ? b : (b > a ? b : a)); }
template <typename T> __device__ __forceinline__ T hg_iabs(T a) { return a < 0 ? -a : a; }
__device__ __forceinline__ long long hg_floordiv(long long a, long long b)
{ long long q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
__device__ __forceinline__ unsigned long long hg_floordiv(unsigned long long a,
                                                          unsigned long long b) { return a / b; }
__device__ __forceinline__ long long hg_mod(long long a, long long b)
{ long long r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
__device__ __forceinline__ unsigned long long hg_mod(unsigned long long a,
                                                     unsigned long long b) { return a % b; }
__device__ __forceinline__ double hg_fmod(double a, double b)
{ double r = fmod(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
__device__ __forceinline__ float hg_fmod(float a, float b)
{ float r = fmodf(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
template <typename T> __device__ __forceinline__ T hg_ipow(T a, T b)
{ T r = 1; while (b > 0) { if (b & 1) r *= a; a *= a; b >>= 1; } return r; }
"""

# one-argument float functions: (math or NumPy object) -> CUDA name for double
_FLOAT_FUNCS = {}
for _name in ("exp", "log", "log2", "log10", "log1p", "expm1", "sqrt", "sin", "cos", "tan",
              "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
              "erf", "erfc", "cbrt"):
    for _module, _alias in ((math, _name), (np, {"asin": "arcsin", "acos": "arccos",
                                                 "atan": "arctan", "asinh": "arcsinh",
                                                 "acosh": "arccosh",
                                                 "atanh": "arctanh"}.get(_name, _name))):
        _fn = getattr(_module, _alias, None)
        if _fn is not None:
            _FLOAT_FUNCS[id(_fn)] = _name
for _fn, _name in ((np.floor, "floor"), (np.ceil, "ceil"), (np.trunc, "trunc"),
                   (math.fabs, "fabs"), (np.fabs, "fabs")):
    _FLOAT_FUNCS[id(_fn)] = _name
# math.floor / ceil / trunc return int64 in Numba
_INT_ROUNDING = {id(math.floor): "floor", id(math.ceil): "ceil", id(math.trunc): "trunc"}
_TWO_ARG_FLOAT = {id(math.pow): "pow", id(math.atan2): "atan2", id(np.arctan2): "atan2",
                  id(math.hypot): "hypot", id(np.hypot): "hypot", id(math.copysign): "copysign",
                  id(np.copysign): "copysign", id(np.power): "pow"}
_PREDICATES = {id(math.isnan): "isnan", id(np.isnan): "isnan", id(math.isinf): "isinf",
               id(np.isinf): "isinf", id(math.isfinite): "isfinite",
               id(np.isfinite): "isfinite"}
_SCALAR_TYPES = {id(t): np.dtype(t) for t in (np.float32, np.float64, np.int8, np.int16,
                                              np.int32, np.int64, np.uint8, np.uint16,
                                              np.uint32, np.uint64, np.bool_)}
_NP_MINMAX = {id(np.minimum): "hg_npmin", id(np.maximum): "hg_npmax", id(np.fmin): "hg_min",
              id(np.fmax): "hg_max"}
_ABS = {id(builtins.abs), id(np.abs), id(np.absolute)}


def c_type(dtype) -> str:
    """The CUDA C++ type of a NumPy dtype."""
    try:
        return C_TYPES[np.dtype(dtype)]
    except KeyError:
        raise ProgramError(f"values of dtype {np.dtype(dtype)} cannot be used on the GPU; "
                           f"use one of {', '.join(str(d) for d in C_TYPES)}") from None


def literal(value, dtype) -> str:
    """A C++ literal of ``value`` in ``dtype`` (inf and nan included)."""
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return "true" if value else "false"
    if dtype.kind == "f":
        value = float(value)
        single = dtype == FLOAT32
        if math.isnan(value):
            return "HG_NAN_F" if single else "HG_NAN"
        if math.isinf(value):
            text = "HG_INF_F" if single else "HG_INF"
            return f"(-{text})" if value < 0 else text
        text = repr(float(np.float32(value))) if single else repr(value)
        if "e" not in text and "." not in text:
            text += ".0"
        return f"{text}f" if single else text
    value = int(value)
    if dtype.kind == "u":
        return f"{value}ULL" if dtype.itemsize == 8 else f"{value}U"
    if value == np.iinfo(np.int64).min:
        return "(-9223372036854775807LL - 1)"
    return f"{value}LL" if dtype.itemsize == 8 else f"{value}"


def arithmetic_type(a, b):
    """Numba's result type of + - * // % & | ^ on two scalars."""
    if a.kind == "f" or b.kind == "f":
        a = INT64 if a.kind in "iu" else a
        b = INT64 if b.kind in "iu" else b
        return np.promote_types(a, b)
    if a == BOOL and b == BOOL:
        return INT64
    if a.kind == "u" and b.kind == "u":
        return UINT64
    return INT64


def unify(a, b):
    """The type both branches of a choice convert to (NumPy's promotion)."""
    return np.promote_types(a, b)


def _float_of(t):
    return FLOAT32 if t in (FLOAT32,) else FLOAT64


class _Translator:
    """Translates one function; ``types`` gives the parameters' dtypes."""

    def __init__(self, program_name, role, fn, param_types, return_type):
        self.where = f"{program_name}.{role}"
        self.fn = fn
        self.return_type = np.dtype(return_type)
        self.tree = self._parse(fn)
        self.first_line = fn.__code__.co_firstlineno
        names = [a.arg for a in self.tree.args.args]
        if len(names) != len(param_types):
            raise ProgramError(f"{self.where}: the source found has {len(names)} parameters,"
                               f" the function {len(param_types)}")
        self.params = dict(zip(names, (np.dtype(t) for t in param_types)))
        self.scope = self._closure_and_globals(fn)
        self.locals = {}

    # source ---------------------------------------------------------------------------
    def _parse(self, fn):
        try:
            source = textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError):
            raise ProgramError(f"{self.where}: its source code cannot be found, and the GPU "
                               f"compiles the source; define the program in a file or a "
                               f"notebook cell, not through exec or eval") from None
        try:
            module = ast.parse(source)
        except SyntaxError:
            # a lambda or a decorated line taken out of an expression
            raise ProgramError(f"{self.where}: its source cannot be parsed on its own; "
                               f"write it as a def under @staticmethod") from None
        for node in ast.walk(module):
            if isinstance(node, ast.FunctionDef) and node.name == fn.__name__:
                return node
        raise ProgramError(f"{self.where}: no 'def {fn.__name__}' found in its source; write "
                           f"it as a def under @staticmethod")

    @staticmethod
    def _closure_and_globals(fn):
        scope = dict(vars(builtins))
        scope.update(fn.__globals__)
        cells = fn.__closure__ or ()
        for name, cell in zip(fn.__code__.co_freevars, cells):
            try:
                scope[name] = cell.cell_contents
            except ValueError:
                pass
        return scope

    def fail(self, node, what):
        line = self.first_line + getattr(node, "lineno", 1) - 1
        raise ProgramError(f"{self.where} (line {line}): {what} is not supported on the GPU; "
                           f"use arithmetic, comparisons, if/else, min/max/abs, math "
                           f"functions and NumPy scalar types")

    # typing pass: the dtype of every local (unified over its assignments) -------------
    def infer_locals(self):
        for _ in range(8):
            before = dict(self.locals)
            self._infer_block(self.tree.body)
            if before == self.locals:
                return
        raise ProgramError(f"{self.where}: the types of its variables do not settle")

    def _infer_block(self, body):
        for stmt in body:
            if isinstance(stmt, ast.Assign):
                if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
                    self.fail(stmt, "assignment to anything but one plain name")
                self._assign_type(stmt.targets[0].id, self.expr(stmt.value)[1], stmt)
            elif isinstance(stmt, ast.AugAssign):
                if not isinstance(stmt.target, ast.Name):
                    self.fail(stmt, "augmented assignment to anything but a plain name")
                binop = ast.BinOp(left=ast.Name(id=stmt.target.id, ctx=ast.Load()),
                                  op=stmt.op, right=stmt.value)
                ast.copy_location(binop, stmt)
                self._assign_type(stmt.target.id, self.expr(binop)[1], stmt)
            elif isinstance(stmt, ast.If):
                self._infer_block(stmt.body)
                self._infer_block(stmt.orelse)

    def _assign_type(self, name, dtype, node):
        if name in self.params:
            dtype = unify(self.params[name], dtype)
            if dtype != self.params[name]:
                self.fail(node, f"assigning a {dtype} value to parameter '{name}' "
                                f"({self.params[name]})")
            return
        self.locals[name] = dtype if name not in self.locals else unify(self.locals[name],
                                                                        dtype)

    # code generation ------------------------------------------------------------------
    def function(self, c_name, c_params):
        self.infer_locals()
        if not self._always_returns(self.tree.body):
            raise ProgramError(f"{self.where} can end without a return statement; it must "
                               f"return a value on every path")
        lines = [f"__device__ __forceinline__ {c_type(self.return_type)} {c_name}("
                 + ", ".join(f"{ct} v_{name}" for name, ct in zip(self.params, c_params))
                 + ") {"]
        for name, dtype in self.locals.items():
            lines.append(f"  {c_type(dtype)} v_{name};")
        lines += self.block(self.tree.body, "  ")
        lines.append("}")
        return "\n".join(lines)

    def _always_returns(self, body):
        if not body:
            return False
        last = body[-1]
        if isinstance(last, ast.Return):
            return True
        if isinstance(last, ast.If):
            return self._always_returns(last.body) and self._always_returns(last.orelse)
        return False

    def block(self, body, indent):
        out = []
        for stmt in body:
            if isinstance(stmt, ast.Return):
                if stmt.value is None:
                    self.fail(stmt, "a return without a value")
                code, t = self.expr(stmt.value)
                out.append(f"{indent}return {self.cast(code, t, self.return_type)};")
            elif isinstance(stmt, (ast.Assign, ast.AugAssign)):
                name = (stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target).id
                value = stmt.value if isinstance(stmt, ast.Assign) else ast.copy_location(
                    ast.BinOp(left=ast.Name(id=name, ctx=ast.Load()), op=stmt.op,
                              right=stmt.value), stmt)
                code, t = self.expr(value)
                target = self.params.get(name, self.locals.get(name))
                out.append(f"{indent}v_{name} = {self.cast(code, t, target)};")
            elif isinstance(stmt, ast.If):
                out.append(f"{indent}if ({self.truth(stmt.test)}) {{")
                out += self.block(stmt.body, indent + "  ")
                if stmt.orelse:
                    out.append(f"{indent}}} else {{")
                    out += self.block(stmt.orelse, indent + "  ")
                out.append(f"{indent}}}")
            elif isinstance(stmt, ast.Pass):
                continue
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                    and isinstance(stmt.value.value, str):
                continue  # docstring
            else:
                self.fail(stmt, f"the statement '{type(stmt).__name__}'")
        return out

    @staticmethod
    def cast(code, have, want):
        if have == want:
            return code
        if want == BOOL:
            return f"(({code}) != 0)"
        return f"(({c_type(want)})({code}))"

    def truth(self, node):
        code, t = self.expr(node)
        return code if t == BOOL else f"(({code}) != 0)"

    # expressions: (code, dtype) ---------------------------------------------------------
    def expr(self, node):
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            self.fail(node, f"the expression '{type(node).__name__}'")
        return method(node)

    def _Constant(self, node):
        return self._constant(node, node.value, f"the constant {node.value!r}")

    def _Name(self, node):
        name = node.id
        if name in self.params:
            return f"v_{name}", self.params[name]
        if name in self.locals:
            return f"v_{name}", self.locals[name]
        if name in self.scope:
            return self._constant(node, self.scope[name], f"'{name}'")
        self.fail(node, f"the unknown name '{name}'")

    def _constant(self, node, value, label):
        """A Python number (or NumPy scalar) as a typed literal; ``label`` names it."""
        if isinstance(value, (bool, np.bool_)):
            return literal(value, BOOL), BOOL
        if isinstance(value, np.generic) and value.dtype in C_TYPES:
            return literal(value, value.dtype), value.dtype
        if isinstance(value, int):
            return literal(value, INT64), INT64
        if isinstance(value, float):
            return literal(value, FLOAT64), FLOAT64
        self.fail(node, f"{label} (a {type(value).__name__}, not a number)")

    def _resolve(self, node):
        """The Python object a name or module attribute refers to (for calls)."""
        if isinstance(node, ast.Name):
            if node.id in self.params or node.id in self.locals:
                self.fail(node, f"calling the variable '{node.id}'")
            if node.id not in self.scope:
                self.fail(node, f"the unknown name '{node.id}'")
            return self.scope[node.id]
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and (node.value.id in self.params
                                                     or node.value.id in self.locals):
                self.fail(node, f"the attribute '.{node.attr}' of the value "
                                f"'{node.value.id}'")
            base = self._resolve(node.value)
            if not inspect.ismodule(base):
                self.fail(node, f"the attribute '.{node.attr}'")
            if not hasattr(base, node.attr):
                self.fail(node, f"'{base.__name__}.{node.attr}' (it does not exist)")
            return getattr(base, node.attr)
        self.fail(node, f"the expression '{type(node).__name__}'")

    def _Attribute(self, node):
        value = self._resolve(node)
        return self._constant(node, value, f"'{ast.unparse(node)}'")

    def _UnaryOp(self, node):
        code, t = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            return f"(!{self.truth(node.operand)})", BOOL
        if isinstance(node.op, ast.UAdd):
            return code, t
        result = t if t.kind == "f" else (UINT64 if t.kind == "u" else INT64)
        if isinstance(node.op, ast.USub):
            return f"(-{self.cast(code, t, result)})", result
        if isinstance(node.op, ast.Invert) and t.kind != "f":
            return f"(~{self.cast(code, t, result)})", result
        self.fail(node, f"the operator '{type(node.op).__name__}' on {t}")

    def _BinOp(self, node):
        a, ta = self.expr(node.left)
        b, tb = self.expr(node.right)
        op = node.op
        if isinstance(op, ast.Div):
            t = FLOAT32 if (ta, tb) in ((FLOAT32, FLOAT32), (FLOAT32, BOOL),
                                        (BOOL, FLOAT32)) else FLOAT64
            return f"({self.cast(a, ta, t)} / {self.cast(b, tb, t)})", t
        if isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            if ta.kind == "f" or tb.kind == "f":
                self.fail(node, "a bitwise operator on a float")
            symbol = {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}[type(op)]
            t = BOOL if ta == tb == BOOL else arithmetic_type(ta, tb)
            return f"({self.cast(a, ta, t)} {symbol} {self.cast(b, tb, t)})", t
        if isinstance(op, (ast.LShift, ast.RShift)):
            if ta.kind == "f" or tb.kind == "f":
                self.fail(node, "a shift of a float")
            t = arithmetic_type(ta, tb)
            symbol = "<<" if isinstance(op, ast.LShift) else ">>"
            return f"({self.cast(a, ta, t)} {symbol} {self.cast(b, tb, t)})", t
        if isinstance(op, ast.Pow):
            if ta.kind != "f" and tb.kind != "f":
                t = arithmetic_type(ta, tb)
                return f"hg_ipow({self.cast(a, ta, t)}, {self.cast(b, tb, t)})", t
            t = FLOAT32 if ta == FLOAT32 and tb != FLOAT64 else FLOAT64
            fn = "powf" if t == FLOAT32 else "pow"
            return f"{fn}({self.cast(a, ta, t)}, {self.cast(b, tb, t)})", t
        t = arithmetic_type(ta, tb)
        a, b = self.cast(a, ta, t), self.cast(b, tb, t)
        if isinstance(op, (ast.Add, ast.Sub, ast.Mult)):
            symbol = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}[type(op)]
            return f"({a} {symbol} {b})", t
        if isinstance(op, ast.FloorDiv):
            if t.kind == "f":
                return f"{'floorf' if t == FLOAT32 else 'floor'}({a} / {b})", t
            return f"hg_floordiv({a}, {b})", t
        if isinstance(op, ast.Mod):
            return (f"hg_fmod({a}, {b})" if t.kind == "f" else f"hg_mod({a}, {b})"), t
        self.fail(node, f"the operator '{type(op).__name__}'")

    def _BoolOp(self, node):
        parts = []
        for value in node.values:
            code, t = self.expr(value)
            if t != BOOL:
                self.fail(node, "'and' / 'or' on non-boolean values (compare them first)")
            parts.append(code)
        symbol = " && " if isinstance(node.op, ast.And) else " || "
        return "(" + symbol.join(parts) + ")", BOOL

    def _Compare(self, node):
        symbols = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
                   ast.NotEq: "!="}
        left, tl = self.expr(node.left)
        parts = []
        for op, right_node in zip(node.ops, node.comparators):
            if type(op) not in symbols:
                self.fail(node, f"the comparison '{type(op).__name__}'")
            right, tr = self.expr(right_node)
            t = unify(tl, tr)
            parts.append(f"({self.cast(left, tl, t)} {symbols[type(op)]} "
                         f"{self.cast(right, tr, t)})")
            left, tl = right, tr
        return "(" + " && ".join(parts) + ")", BOOL

    def _IfExp(self, node):
        a, ta = self.expr(node.body)
        b, tb = self.expr(node.orelse)
        t = unify(ta, tb)
        return f"({self.truth(node.test)} ? {self.cast(a, ta, t)} : {self.cast(b, tb, t)})", t

    def _Call(self, node):
        if node.keywords:
            self.fail(node, "keyword arguments")
        fn = self._resolve(node.func)
        args = [self.expr(a) for a in node.args]
        key = id(fn)
        if fn in (builtins.min, builtins.max) or key in _NP_MINMAX:
            if len(args) < 2 or (key in _NP_MINMAX and len(args) != 2):
                self.fail(node, "min/max of fewer than two scalars")
            helper = _NP_MINMAX.get(key, "hg_min" if fn is builtins.min else "hg_max")
            code, t = args[0]
            for code_b, tb in args[1:]:
                u = unify(t, tb)
                code = f"{helper}<{c_type(u)}>({self.cast(code, t, u)}, {self.cast(code_b, tb, u)})"
                t = u
            return code, t
        if len(args) == 1:
            (code, t), = args
            if key in _ABS:
                if t.kind == "f":
                    return f"{'fabsf' if t == FLOAT32 else 'fabs'}({code})", t
                u = INT64 if t == BOOL else t
                return f"hg_iabs<{c_type(u)}>({self.cast(code, t, u)})", u
            if fn is builtins.float:
                return self.cast(code, t, FLOAT64), FLOAT64
            if fn is builtins.int:
                return self.cast(code, t, INT64), INT64
            if fn is builtins.bool:
                return self.cast(code, t, BOOL), BOOL
            if key in _SCALAR_TYPES:
                want = _SCALAR_TYPES[key]
                return self.cast(code, t, want), want
            if key in _FLOAT_FUNCS:
                u = _float_of(t)
                name = _FLOAT_FUNCS[key] + ("f" if u == FLOAT32 else "")
                return f"{name}({self.cast(code, t, u)})", u
            if key in _INT_ROUNDING:
                u = _float_of(t)
                if t.kind != "f":
                    return self.cast(code, t, INT64), INT64
                name = _INT_ROUNDING[key] + ("f" if u == FLOAT32 else "")
                return f"((long long){name}({code}))", INT64
            if key in _PREDICATES:
                if t.kind != "f":
                    return ("true" if _PREDICATES[key] == "isfinite" else "false"), BOOL
                return f"{_PREDICATES[key]}({code})", BOOL
        if len(args) == 2 and key in _TWO_ARG_FLOAT:
            (a, ta), (b, tb) = args
            u = FLOAT32 if ta == tb == FLOAT32 else FLOAT64
            name = _TWO_ARG_FLOAT[key] + ("f" if u == FLOAT32 else "")
            return f"{name}({self.cast(a, ta, u)}, {self.cast(b, tb, u)})", u
        label = getattr(fn, "__name__", repr(fn))
        self.fail(node, f"calling '{label}' with {len(args)} argument(s)")


def device_function(program_name, role, fn, c_name, param_types, return_type):
    """CUDA source of ``fn`` as ``__device__ <return_type> c_name(params)``; the
    parameters have the NumPy dtypes ``param_types``."""
    translator = _Translator(program_name, role, fn, param_types, return_type)
    return translator.function(c_name, [c_type(t) for t in param_types])
