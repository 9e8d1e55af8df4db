"""Activation checkpointing: trade recomputation for activation memory (the autograd boundary).

Bottleneck it removes: activation memory that grows linearly with depth. Backprop keeps
every intermediate of the forward pass until backward reaches it, so a stack of ``L``
transformer blocks on ``T`` tokens of width ``D`` holds on the order of ``L * T * D *
(a dozen arrays)`` floats at the peak. ``checkpoint(fn, x)`` runs ``fn`` without recording
(its intermediates are freed as soon as they are used), keeps only the inputs, and
re-runs ``fn`` with recording inside backward, just before its gradient is needed. With
``checkpoint_sequential(layers, segments, x)`` only the ``segments`` boundary tensors plus
one segment's intermediates are alive at once: with ``segments ~ sqrt(L)`` memory goes
from O(L) to O(sqrt(L)) for about one extra forward pass of compute.

What this file owns
  * ``CheckpointFunction``: a ``Function`` whose forward calls the wrapped function under
    ``no_grad`` and whose backward recomputes it under ``enable_grad`` on fresh leaf
    copies of the inputs, backpropagates the incoming gradient through the recomputed
    graph and hands the input and parameter gradients back to the engine.
  * ``checkpoint(function, *args, preserve_rng_state=True, **kwargs)`` and
    ``checkpoint_sequential(layers, segments, x, preserve_rng_state=True)``.

Semantics (PyTorch's, where it has the same thing)
  * Non-Tensor arguments and keyword arguments pass through unchanged (a Tensor passed
    as a keyword argument is a constant: it gets no gradient).
  * Parameters: the trainable parameters of every ``Layer`` reachable from ``function``
    (the function itself, the instance of a bound method, Layer arguments, and Layers held
    in the function's closure) become explicit inputs of the recorded node, so they get
    gradients even when no input requires grad. A parameter reached some other way still
    receives its gradient (the recomputation accumulates into it) whenever an input
    requires grad.
  * RNG: with ``preserve_rng_state`` the framework generator state is saved before the
    forward and restored for the recomputation (and put back afterwards), so dropout masks
    are identical and gradients equal the un-checkpointed run.
  * ``function`` must return one Tensor. When nothing requires grad (or grad mode is off)
    it is simply called.

Contract: Tensor inputs give a Tensor output on the tape; gradients match the
un-checkpointed run (tested with gradcheck). There is no native path: this extension
changes what is stored, not how anything is computed.

Import it as ``from tinytorch.extensions import checkpoint, checkpoint_sequential``. The
module is named ``activation_checkpoint`` (not ``checkpoint``) so that the package
attribute ``tinytorch.extensions.checkpoint`` is the function and this module stays
reachable as ``tinytorch.extensions.activation_checkpoint``.

Assumes: the core's autograd (Function, the grad modes) and the framework generator, whose
state is restored so a recomputed forward draws the same random numbers.
"""
from __future__ import annotations

import numpy as np

from ..core.autograd import Function, enable_grad, is_grad_enabled, no_grad
from ..core.layers import Layer
from ..core.random import get_rng_state, set_rng_state
from ..core.tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointFunction"]


def _layers_reachable(function, args, kwargs):
    """Layers the function can use: itself, a bound method's instance, Layer arguments and
    Layers (or lists/tuples/dicts of them) captured in its closure."""
    found = []

    def add(obj):
        if isinstance(obj, Layer):
            found.append(obj)
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                if isinstance(item, Layer):
                    found.append(item)
        elif isinstance(obj, dict):
            for item in obj.values():
                if isinstance(item, Layer):
                    found.append(item)

    add(function)
    add(getattr(function, "__self__", None))
    for cell in getattr(function, "__closure__", None) or ():
        try:
            add(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    for a in list(args) + list(kwargs.values()):
        add(a)
    return found


def _trainable_parameters(layers):
    params, seen = [], set()
    for layer in layers:
        candidates = [p for _, p in layer.named_parameters()]
        candidates += [p for p in layer.parameters() if isinstance(p, Tensor)]
        for p in candidates:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
    return params


class CheckpointFunction(Function):
    """Inputs: the Tensor arguments of ``function`` followed by the parameters found for
    it. Forward keeps only those inputs; backward recomputes and backpropagates."""

    def forward(self, *arrays, function, n_args, template, kwargs, rng_state):
        """Call ``function`` under no_grad and return its output array, keeping only the
        inputs.

        ``arrays``: the first ``n_args`` are the Tensor arguments' arrays, the rest the
        parameters'; ``template``: the positional arguments with None where a Tensor goes;
        ``kwargs``: keyword arguments passed through; ``rng_state``: the generator state
        to replay in backward, or None.
        """
        # Tensor positions in ``template`` are None and are filled from ``arrays`` in order.
        self.function, self.template, self.kwargs = function, template, kwargs
        self.n_args, self.rng_state = n_args, rng_state
        self.arrays = arrays[:n_args]
        with no_grad():
            out = function(*self._rebuild(self.arrays, [False] * n_args), **kwargs)
        self.leaves = None
        if not isinstance(out, Tensor):
            raise TypeError(f"checkpoint: the function must return a single Tensor, got "
                            f"{type(out).__name__}")
        return out.data

    def _rebuild(self, arrays, requires):
        args, it = [], iter(zip(arrays, requires))
        leaves = []
        for item in self.template:
            if item is None:
                arr, req = next(it)
                leaf = Tensor._make(arr, bool(req), None)
                leaves.append(leaf)
                args.append(leaf)
            else:
                args.append(item)
        self.leaves = leaves
        return args

    def backward(self, grad_output):
        """Recompute ``function`` with recording (same RNG state), backpropagate
        ``grad_output`` through it and return the gradients of the inputs and parameters."""
        need = self.needs_input_grad
        n = self.n_args
        params = self.parents[n:]
        saved_param_grads = [p.grad for p in params]
        for p in params:
            p.grad = None
        current_rng = get_rng_state() if self.rng_state is not None else None
        try:
            if self.rng_state is not None:
                set_rng_state(self.rng_state)
            with enable_grad():
                args = self._rebuild(self.arrays, need[:n])
                out = self.function(*args, **self.kwargs)
            if out.requires_grad:
                out.backward(grad_output)
            input_grads = [leaf.grad if r else None for leaf, r in zip(self.leaves, need[:n])]
            param_grads = [p.grad for p in params]
        finally:
            for p, g in zip(params, saved_param_grads):
                p.grad = g
            if current_rng is not None:
                set_rng_state(current_rng)
            self.leaves = None
        return tuple(input_grads) + tuple(param_grads)


def checkpoint(function, *args, preserve_rng_state: bool = True, **kwargs):
    """Run ``function(*args, **kwargs)`` without storing its intermediates; recompute them
    during backward. Returns what ``function`` returns (one Tensor).

    Args:
        function: a callable returning one Tensor: a Layer, a bound method or a function
            (parameters of Layers it reaches are found and get gradients).
        args: its positional arguments; Tensors among them are the differentiable inputs.
        preserve_rng_state: save the framework generator state and replay it in the
            recomputation, so dropout masks match (PyTorch's default, True).
        kwargs: passed through unchanged (a Tensor here is a constant).

    Example: ``h = checkpoint(block, h)`` for each TransformerBlock ``block``.
    """
    if not callable(function):
        raise TypeError(f"checkpoint: function must be callable, got {type(function).__name__}")
    tensor_args = [a for a in args if isinstance(a, Tensor)]
    params = _trainable_parameters(_layers_reachable(function, args, kwargs)) if is_grad_enabled() else []
    if not is_grad_enabled() or not (params or any(t.requires_grad for t in tensor_args)):
        return function(*args, **kwargs)  # nothing will backpropagate: nothing to save
    template = tuple(None if isinstance(a, Tensor) else a for a in args)
    inputs = tensor_args + [p for p in params if not any(p is t for t in tensor_args)]
    return CheckpointFunction.apply(
        *inputs, function=function, n_args=len(tensor_args), template=template, kwargs=kwargs,
        rng_state=get_rng_state() if preserve_rng_state else None)


class _Segment(Layer):
    """A run of consecutive layers, as one Layer (so checkpoint finds their parameters)."""

    def __init__(self, layers):
        self.layers = list(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def checkpoint_sequential(layers, segments: int, x, preserve_rng_state: bool = True,
                          checkpoint_last: bool = True):
    """Split ``layers`` (a ``Sequential`` or a list of callables) into ``segments`` runs of
    near-equal length, checkpoint each run and return the output. ``segments ~
    sqrt(len(layers))`` gives the O(sqrt(N)) memory schedule.

    ``checkpoint_last``: PyTorch leaves the last run un-checkpointed, since backward needs
    its intermediates first. Here every op output stays reachable from the loss until the
    loss itself is dropped, so an un-checkpointed last run would stay alive through the
    whole backward and double the peak; by default it is checkpointed too (one more
    segment of recomputation). Pass False for PyTorch's schedule.

    ``x`` is the input Tensor of the first layer; ``preserve_rng_state`` as in
    ``checkpoint``."""
    if hasattr(layers, "layers") and isinstance(layers.layers, list):
        layers = layers.layers
    layers = list(layers)
    if not layers:
        raise ValueError("checkpoint_sequential: got no layers")
    if isinstance(segments, bool) or not isinstance(segments, (int, np.integer)) or not 1 <= segments <= len(layers):
        raise ValueError(f"checkpoint_sequential: segments must be an int in [1, {len(layers)}] "
                         f"(the number of layers), got {segments!r}")
    n, segments = len(layers), int(segments)
    bounds = [(i * n) // segments for i in range(segments + 1)]  # strictly increasing: n >= segments
    for i in range(segments):
        seg = _Segment(layers[bounds[i]:bounds[i + 1]])
        if i == segments - 1 and not checkpoint_last:
            x = seg(x)
        else:
            x = checkpoint(seg, x, preserve_rng_state=preserve_rng_state)
    return x
