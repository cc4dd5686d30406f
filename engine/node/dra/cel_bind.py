"""CEL's `cel.bind(name, init, body)` macro (cel-go's ext.Bindings, in Kubernetes' CEL environment); pure.

cel-python has no such macro: `cel.bind` parses as a call of `bind` on a variable `cel`.
The parse tree is rewritten before it runs as `[init].map(name, body)[0]`, which means
the same: `init` is evaluated once, `body` sees it as `name` (shadowing any outer
variable of that name), and an error in either is the expression's error. The estimated
cost of the rewritten form is the body's once, as cel-go estimates a binding.
"""

from __future__ import annotations

from lark import Token, Tree
from lark.tree import Meta


class BindError(ValueError):
    """A `cel.bind` call cel-go refuses to compile (the message says why)."""


def _rule(name: str, meta: Meta, *children: Tree[Token] | Token) -> Tree[Token]:
    """A parse tree node; `meta` (where in the expression) is the bind call's, for error messages."""
    return Tree(Token("RULE", name), list(children), meta)


def _wrapped(inner: Tree[Token], meta: Meta) -> Tree[Token]:
    """An `expr` whose value is `inner`, a `member` level node, through the precedence levels."""
    node = _rule("unary", meta, inner)
    for level in ("multiplication", "addition", "relation", "conditionaland", "conditionalor", "expr"):
        node = _rule(level, meta, node)
    return node


def _identifier(expr: Tree[Token] | Token) -> str | None:
    """The variable an argument names when it is a bare identifier; None for any other expression."""
    node = expr
    while isinstance(node, Tree) and len(node.children) == 1 and node.data != "ident":
        node = node.children[0]
    if isinstance(node, Tree) and node.data == "ident" and len(node.children) == 1:
        return str(node.children[0])
    return None


def _is_bind(node: Tree[Token]) -> bool:
    if node.data != "member_dot_arg" or len(node.children) != 3:
        return False
    target, method, _ = node.children
    return isinstance(method, Token) and str(method) == "bind" and _identifier(target) == "cel"


def _rewritten(node: Tree[Token]) -> Tree[Token]:
    """`cel.bind(name, init, body)` as `[init].map(name, body)[0]` (a `member_index` node)."""
    arguments = node.children[2]
    args = arguments.children if isinstance(arguments, Tree) else []
    if len(args) != 3:
        raise BindError(f"cel.bind() takes 3 arguments (name, init, body), got {len(args)}")
    name, init, body = args
    if _identifier(name) is None:
        raise BindError("cel.bind() variable names must be simple identifiers")
    assert isinstance(init, Tree) and isinstance(body, Tree) and isinstance(name, Tree)
    m = node.meta
    listed = _rule("member", m, _rule("primary", m, _rule("list_lit", m, _rule("exprlist", m, init))))
    mapped = _rule("member_dot_arg", m, listed, Token("IDENT", "map"), _rule("exprlist", m, name, body))
    zero = _wrapped(_rule("member", m, _rule("primary", m, _rule("literal", m, Token("INT_LIT", "0")))), m)
    return _rule("member_index", m, _rule("member", m, mapped), zero)


def expand_binds(tree: Tree[Token]) -> Tree[Token]:
    """The tree with every `cel.bind` call rewritten in place (innermost first); BindError for a bad call."""
    stack: list[tuple[Tree[Token], bool]] = [(tree, False)]
    while stack:  # children before their parent, without recursion
        node, visited = stack.pop()
        if not visited:
            stack.append((node, True))
            stack.extend((child, False) for child in node.children if isinstance(child, Tree))
            continue
        for i, child in enumerate(node.children):
            if isinstance(child, Tree) and _is_bind(child):
                node.children[i] = _rewritten(child)
    return tree
