"""DRA CEL selectors compiled with cel-python in Kubernetes' device environment; pure.

The environment is the one `k8s.io/dynamic-resource-allocation/cel` declares:

    device.driver                       the device's driver
    device.attributes["<domain>"].<id>  int, bool, string, or a semver for a version attribute;
                                        a list of them for a list attribute (DRAListTypeAttributes)
    device.capacity["<domain>"].<id>    a quantity

An attribute without a domain belongs to the driver's. Looking up a domain the device
does not have gives an empty map (so `has(...)` and `... in` work), as upstream's
mapper does. Bounds as the API applies them: at most 10 KiB of expression
(CELSelectorExpressionMaxLength), brackets nested at most 250 deep (cel-go's parser),
and an estimated cost of at most 1,000,000 (CELSelectorExpressionMaxCost): a
comprehension's body costs once per element of its range (a literal list's length, or
64 for a range read from the device). An expression that fails to compile, is too
large, or errs on a device is a SelectorError with the expression. `cel.bind` is
expanded before the cost is estimated (cel_bind); `x.includes(v)` is true when the
list `x` holds `v` or the scalar `x` equals it (KEP-5491's helper for selectors that
read an attribute that is a scalar on some devices and a list on others).

`CelPrograms` compiles each expression once; its table is the caller's (an Engine's memo).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import celpy
import msgspec
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError
from lark import Token, Tree

from engine.core.memo import BoundedCache
from engine.node.dra.cel_bind import BindError, expand_binds
from engine.node.dra.cel_library import FUNCTIONS, CelLibraryError, Quantity, make_quantity, make_semver
from engine.node.dra.model import Device

MAX_EXPRESSION_LENGTH = 10 * 1024
MAX_NESTING = 250
MAX_COST = 1_000_000
# cel-python evaluates by recursion, a few Python frames per parse-tree level: deeper trees
# would exhaust Python's stack (cel-go has no such limit short of its 250 nesting levels).
MAX_TREE_DEPTH = 150
DEVICE_RANGE = 64  # elements a comprehension over a device's value is taken to have
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_SHOWN = 120


class SelectorError(ValueError):
    """A selector that cannot be compiled or evaluated (the message names the expression)."""


def shown(expression: str) -> str:
    return repr(expression if len(expression) <= _SHOWN else expression[:_SHOWN] + "...")


class _DefaultMap(celtypes.MapType):
    """A map whose missing keys read as an empty map: upstream's attributes and capacity."""

    def __getitem__(self, key: Any) -> Any:
        if key in self:
            return super().__getitem__(key)
        return celtypes.MapType({})


def _nesting(expression: str) -> int:
    depth = deepest = 0
    quote = ""
    for char in expression:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
    return deepest


def estimated_cost(tree: Tree[Token] | Token) -> int:
    """A worst-case cost: one per node, a comprehension's body once per element of its range."""
    if isinstance(tree, Token):
        return 1
    if tree.data == "member_dot_arg" and len(tree.children) == 3:
        target, name, args = tree.children
        if isinstance(name, Token) and str(name) in _MACROS:
            return 1 + estimated_cost(target) + _range_size(target) * estimated_cost(args)
    return 1 + sum(estimated_cost(child) for child in tree.children)


def _range_size(target: Tree[Token] | Token) -> int:
    node = target
    while isinstance(node, Tree) and len(node.children) == 1 and node.data not in ("list_lit", "map_lit"):
        node = node.children[0]
    if isinstance(node, Tree) and node.data in ("list_lit", "map_lit"):
        inner = node.children[0] if node.children else None
        return max(1, len(inner.children) if isinstance(inner, Tree) else 0)
    return DEVICE_RANGE


class CompiledSelector(msgspec.Struct, frozen=True, kw_only=True):
    expression: str
    program: Any = None  # a celpy Runner; None with an error
    error: str = ""


def tree_depth(tree: Tree[Token]) -> int:
    """The parse tree's depth, counted without recursion (the evaluator recurses once per level)."""
    deepest = 0
    stack: list[tuple[Tree[Token] | Token, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, Tree):
            stack.extend((child, depth + 1) for child in node.children)
    return deepest


def compile_selector(expression: str) -> CompiledSelector:
    """The compiled expression, or its compile error (never raises)."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        error = f"{len(expression)} characters, more than {MAX_EXPRESSION_LENGTH}"
        return CompiledSelector(expression=expression, error=error)
    if _nesting(expression) > MAX_NESTING:
        return CompiledSelector(expression=expression, error=f"nested more than {MAX_NESTING} deep")
    env = celpy.Environment()
    try:
        ast = env.compile(expression)
    except CELParseError as exc:
        return CompiledSelector(expression=expression, error=f"compilation failed: {str(exc).splitlines()[0]}")
    except RecursionError:
        return CompiledSelector(expression=expression, error=f"nested more than {MAX_NESTING} deep")
    try:
        ast = expand_binds(ast)
    except BindError as exc:
        return CompiledSelector(expression=expression, error=f"compilation failed: {exc}")
    depth = tree_depth(ast)
    if depth > MAX_TREE_DEPTH:
        error = f"its parse tree is {depth} levels deep, more than {MAX_TREE_DEPTH} (nested or chained too far)"
        return CompiledSelector(expression=expression, error=error)
    cost = estimated_cost(ast)
    if cost > MAX_COST:
        return CompiledSelector(expression=expression, error=f"estimated cost {cost} exceeds the limit of {MAX_COST}")
    return CompiledSelector(expression=expression, program=env.program(ast, functions=dict(FUNCTIONS)))


def _version(name: str, text: str) -> Any:
    try:
        return make_semver(text)
    except CelLibraryError as exc:
        raise SelectorError(f"attribute {name}: parse semantic version: {exc}") from None


def _list_value(name: str, attribute: Any) -> Any:
    """A list attribute as a CEL list; None for none (the attribute is then left out)."""
    if attribute.ints:
        return celtypes.ListType([celtypes.IntType(v) for v in attribute.ints])
    if attribute.bools:
        return celtypes.ListType([celtypes.BoolType(v) for v in attribute.bools])
    if attribute.strings:
        return celtypes.ListType([celtypes.StringType(v) for v in attribute.strings])
    if attribute.versions:
        return celtypes.ListType([_version(name, v) for v in attribute.versions])
    return None


def _attribute_value(name: str, attribute: Any, lists: bool) -> Any:
    if attribute.int_value is not None:
        return celtypes.IntType(attribute.int_value)
    if attribute.bool_value is not None:
        return celtypes.BoolType(attribute.bool_value)
    if attribute.string is not None:
        return celtypes.StringType(attribute.string)
    if attribute.version is not None:
        return _version(name, attribute.version)
    if _list_value(name, attribute) is not None:
        return _list_value(name, attribute) if lists else None
    raise SelectorError(f"attribute {name}: unsupported attribute value")


def _by_domain(driver: str, values: Mapping[str, Any]) -> _DefaultMap:
    domains: dict[str, dict[Any, Any]] = {}
    for name, value in values.items():
        domain, sep, ident = name.partition("/")
        if not sep:
            domain, ident = driver, name
        domains.setdefault(domain, {})[celtypes.StringType(ident)] = value
    return _DefaultMap({celtypes.StringType(d): celtypes.MapType(v) for d, v in domains.items()})


def device_activation(driver: str, device: Device, lists: bool = True) -> dict[str, Any]:
    """The `device` variable for one device; SelectorError when an attribute cannot be read.

    Without `lists` (the DRAListTypeAttributes gate off) a list attribute is left out."""
    values = {name: _attribute_value(name, a, lists) for name, a in device.attributes.items()}
    attributes = {name: value for name, value in values.items() if value is not None}
    try:
        capacity: dict[str, Quantity] = {name: make_quantity(c.value) for name, c in device.capacity.items()}
    except CelLibraryError as exc:
        raise SelectorError(f"capacity: {exc}") from None
    value = celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(driver),
            celtypes.StringType("attributes"): _by_domain(driver, attributes),
            celtypes.StringType("capacity"): _by_domain(driver, capacity),
        }
    )
    return {"device": value}


def _eval_error_text(exc: BaseException) -> str:
    text = str(exc.args[0]) if exc.args else str(exc)
    detail = exc.args[2] if len(exc.args) > 2 and exc.args[2] else ()
    text = text.split(" (in activation", 1)[0]
    if detail and text in ("no such key", "return error for overflow"):
        text = f"{text}: {', '.join(str(d) for d in detail)}" if text == "no such key" else str(detail[0])
    return text


def evaluate(selector: CompiledSelector, activation: dict[str, Any]) -> bool:
    """Whether the selector selects the device; SelectorError on an error or a non-bool result."""
    if selector.error:
        raise SelectorError(f"CEL compile error: {selector.error}")
    try:
        result = selector.program.evaluate(activation)
    except (CELEvalError, CelLibraryError, TypeError, ValueError, ArithmeticError, KeyError) as exc:
        raise SelectorError(f"CEL runtime error: {_eval_error_text(exc)}") from None
    except RecursionError:
        raise SelectorError("CEL runtime error: nested too deep to evaluate") from None
    if not isinstance(result, celtypes.BoolType):
        raise SelectorError(f"CEL result of type {type(result).__name__} could not be converted to bool")
    return bool(result)


class CelPrograms:
    """Compiled selectors by expression, and what each selected of a device, in the caller's bounded tables.

    A result is kept per (expression, driver, device object): the same slice objects asked
    again (the placer's view, an engine's next decision) are not evaluated again. A device
    is frozen, and the entry holds it, so its identity cannot be reused while it is kept."""

    def __init__(
        self,
        table: BoundedCache[str, CompiledSelector] | None = None,
        results: BoundedCache[tuple[str, str, int, bool], tuple[Device, bool]] | None = None,
    ) -> None:
        self._table: BoundedCache[str, CompiledSelector] = table if table is not None else BoundedCache(1024)
        self._results: BoundedCache[tuple[str, str, int, bool], tuple[Device, bool]] = (
            results if results is not None else BoundedCache(65536, recency=False)
        )

    def get(self, expression: str) -> CompiledSelector:
        found = self._table.get(expression)
        if found is None:
            found = compile_selector(expression)
            self._table.put(expression, found)
        return found

    def selects(self, expression: str, driver: str, device: Device, lists: bool = True) -> bool:
        """Whether the selector selects the device; SelectorError as `evaluate` (errors are not kept).

        `lists`: whether list attributes are read (the DRAListTypeAttributes gate)."""
        key = (expression, driver, id(device), lists)
        kept = self._results.get(key)
        if kept is not None and kept[0] is device:
            return kept[1]
        result = evaluate(self.get(expression), device_activation(driver, device, lists))
        self._results.put(key, (device, result))
        return result
