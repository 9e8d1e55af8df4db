"""Upstream TinyTorch's ``extensions.compile``: a toy tracing compiler.

``compile_graph(func, *input_names)`` runs ``func`` once on symbolic ``TracedNode`` inputs,
which record ``+`` and ``*`` as an expression, and returns the source of one Python function
``fused_kernel(<input_names>)`` computing the whole expression in a single statement (what a
fusing compiler emits). It only traces ``+`` and ``*`` (with numbers or other nodes), like
upstream; ``exec`` the source to get a callable that works on NumPy arrays or Tensors.
"""
from __future__ import annotations

__all__ = ["TracedNode", "compile_graph"]


class TracedNode:
    """A symbolic value: ``name`` is the expression that computes it.

    Args:
        name: the expression text (an input name, or a traced sub-expression).
    """

    def __init__(self, name: str):
        self.name = str(name)

    @staticmethod
    def _text(other) -> str:
        return other.name if isinstance(other, TracedNode) else repr(other)

    def __add__(self, other):
        return TracedNode(f"({self.name} + {self._text(other)})")

    def __radd__(self, other):
        return TracedNode(f"({self._text(other)} + {self.name})")

    def __mul__(self, other):
        return TracedNode(f"({self.name} * {self._text(other)})")

    def __rmul__(self, other):
        return TracedNode(f"({self._text(other)} * {self.name})")

    def __repr__(self):
        return f"TracedNode({self.name!r})"


def compile_graph(func, *input_names) -> str:
    """Trace ``func`` on one ``TracedNode`` per name and return the fused kernel's source,
    ``def fused_kernel(<names>): return <expression>``; TypeError when ``func`` does not
    return a traced expression.

    Args:
        func: a function of len(input_names) arguments using only + and *.
        input_names: the argument names (valid Python identifiers).
    """
    for name in input_names:
        if not str(name).isidentifier():
            raise ValueError(f"compile_graph: {name!r} is not a valid argument name")
    out = func(*(TracedNode(n) for n in input_names))
    if not isinstance(out, TracedNode):
        raise TypeError(f"compile_graph: {getattr(func, '__name__', func)} returned {type(out).__name__}, "
                        "not a traced expression (only + and * are traced)")
    return (f"def fused_kernel({', '.join(input_names)}):\n"
            f"    # Fused by TinyTorch Compiler\n"
            f"    return {out.name}\n")
