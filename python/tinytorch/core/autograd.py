"""Autograd: the Function contract, the tape walk, grad mode and gradcheck.

What this file owns
  * ``Function``: the autograd extension point. A subclass defines exactly
    ``forward(self, *arrays, **params)`` (NumPy arrays in, one NumPy array out) and
    ``backward(self, grad_output)`` (one gradient or None per positional input).
    ``Function.apply(*args, **params)`` unwraps Tensors to their ``.data``, passes any
    other argument through untouched, runs ``forward`` and, when grad mode is on and an
    input requires grad, records the call on the output Tensor (``out._ctx``).
  * ``run_backward``: the engine behind ``Tensor.backward``. The tape is a DAG of
    Function instances; it is sorted once in topological order (iteratively, so deep
    graphs do not hit the recursion limit) and walked from the root, summing gradients
    where a tensor is used twice. Gradients that were broadcast in forward are reduced
    here, once, for every Function, so a Function may return a gradient in the shape
    of its output.
  * ``no_grad`` / ``enable_grad`` / ``set_grad_enabled`` / ``is_grad_enabled``.
  * ``gradcheck(fn, *inputs)``: float64 central differences against backward.

  * ``register_tensor_class``: how the engine learns the Tensor class (see below).
  * ``register_post_accumulate_grad_hook(tensor, hook)`` (PyTorch's name; also the Tensor
    method): ``hook(tensor)`` runs once per backward, right after that leaf's ``.grad`` got
    its last contribution of the pass (the walk is topological, so a leaf is reached only
    when every path into it is summed). Returns a handle with ``remove()``. Distributed
    data parallel starts a bucket's all-reduce from it. With no hook registered anywhere the
    engine pays one global int test per leaf.

What it assumes
  * ``backward`` never writes into ``grad_output`` or into arrays it saved, and returns
    arrays that it does not keep (views are fine: the engine copies those before they
    become a leaf's ``.grad``).
  * Each Function produces one output.

Design notes
  * Per-op overhead matters (an MLP training step runs ~30 ops), so ``apply`` does one
    pass over its arguments, the Tensor class uses ``__slots__`` and the engine only
    reduces broadcasting when the shapes differ.
  * After a backward without ``retain_graph`` every visited Function is released: its
    instance ``__dict__`` (the saved arrays) is cleared and a second backward through
    it raises a RuntimeError that says to pass ``retain_graph=True``.
  * Stale saved values (PyTorch's version-counter check, kept to one int per node): every
    in-place change of a Tensor's data (``t.data = a``, ``t.data -= d``, optimizer steps)
    goes through ``bump_version``, which advances a global counter and stamps the tensor
    with it. ``apply`` records the counter on the node; before a node's backward the
    engine compares, and only when something changed since that forward does it look
    whether the Function saved the changed tensor's array (or a view of it) or its own
    output, and then raises RuntimeError instead of differentiating with the new values.
  * No import of ``tensor``: this module imports only NumPy, and the core is layered
    autograd <- ops, activation_ops <- tensor (tensor.py builds on the engine:
    ``Tensor.backward`` is ``run_backward``, every operator is a Function). The engine
    still has to recognise Tensors (to unwrap them) and make them (``apply``'s output,
    gradcheck's inputs), so tensor.py hands its class over once, as it defines it, with
    the class decorator ``@register_tensor_class``: a registration, not an import, so
    there is no cycle and nothing patches this module from outside. Until then nothing is
    a Tensor and making one raises a RuntimeError that says which import is missing;
    nobody can hold a Tensor before tensor.py ran, so only a Function applied to bare
    arrays can see that error.
"""
from __future__ import annotations

import numpy as np

__all__ = ["enable_autograd", "Function", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
           "run_backward", "gradcheck", "bump_version", "register_post_accumulate_grad_hook"]

_grad_enabled = True
_mutations = 0  # advanced by every bump_version; a node compares it with its forward's value
_leaf_hooks = 0  # live post-accumulate-grad hooks in the process; 0 keeps _accumulate_leaf hook-free


class _TensorClassNotRegistered:
    """Stands in for the Tensor class until tensor.py registers it: no object is an instance,
    and making one says what is missing."""

    _MESSAGE = ("autograd: no Tensor class is registered yet; import tinytorch.core.tensor "
                "(it registers itself) before applying a Function to plain arrays")

    def __init__(self, *args, **kwargs):
        raise RuntimeError(self._MESSAGE)

    @classmethod
    def _make(cls, data, requires_grad, ctx):
        raise RuntimeError(cls._MESSAGE)


_tensor_class = _TensorClassNotRegistered


def register_tensor_class(cls) -> type:
    """Tell the engine which class is the Tensor (tensor.py's class decorator, run once).

    ``cls`` must provide the protocol the engine uses: ``_data``, ``requires_grad``,
    ``_ctx``, ``_version``, ``grad``, ``data`` and ``_make(data, requires_grad, ctx)``."""
    global _tensor_class
    _tensor_class = cls
    return cls


def is_grad_enabled() -> bool:
    """True when operations are being recorded for backward."""
    return _grad_enabled


class set_grad_enabled:
    """Context manager (and decorator) that turns recording on or off.

    Args:
        mode: True records operations for backward inside the block (or the decorated
            function), False does not; the previous mode is restored on exit.
    """

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self.prev = None

    def __enter__(self):
        global _grad_enabled
        self.prev = _grad_enabled
        _grad_enabled = self.mode
        return self

    def __exit__(self, *exc):
        global _grad_enabled
        _grad_enabled = self.prev
        return False

    def __call__(self, func):
        mode = self.mode

        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return func(*args, **kwargs)
        wrapper.__name__ = getattr(func, "__name__", "wrapper")
        wrapper.__doc__ = getattr(func, "__doc__", None)
        return wrapper


class no_grad(set_grad_enabled):
    """``with no_grad():`` runs operations without recording them (inference, updates)."""

    def __init__(self):
        super().__init__(False)


class enable_grad(set_grad_enabled):
    """``with enable_grad():`` records operations even inside ``no_grad``."""

    def __init__(self):
        super().__init__(True)


def enable_autograd(quiet: bool = True) -> None:
    """Upstream TinyTorch's switch that patches Tensor to record gradients. Here autograd
    is built in from the start, so this does nothing (it changes no grad mode and patches
    nothing); it exists so upstream code that calls it runs unchanged.

    Args:
        quiet: when False, print one line saying autograd is on (upstream prints a banner).
    """
    if not quiet:
        print("autograd is built into TinyTorch: tensors with requires_grad=True record operations")


class Function:
    """One differentiable operation. Subclass and define ``forward`` and ``backward``.

    Example::

        class Square(Function):
            def forward(self, x):
                self.x = x
                return x * x
            def backward(self, grad_output):
                return 2.0 * self.x * grad_output

        y = Square.apply(t)

    Inside ``forward`` the tuple ``self.needs_input_grad`` says which inputs will
    want a gradient (all False under ``no_grad``), so a Function can skip saving or
    computing what nobody asks for.
    """

    # Engine bookkeeping lives in slots; anything a subclass saves goes in __dict__,
    # which is what release() frees.
    __slots__ = ("parents", "needs_input_grad", "_released", "_epoch", "__dict__", "__weakref__")

    def forward(self, *arrays, **params):
        """Compute the output: NumPy arrays (the Tensor arguments of ``apply``, unwrapped;
        other arguments as given) and keyword ``params`` in, one NumPy array out. Save on
        ``self`` whatever ``backward`` needs. Subclasses define this."""
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    def backward(self, grad_output):
        """Given ``grad_output`` (d loss / d output, an array of the output's shape), return
        one gradient per positional input of ``forward``: an array of that input's shape
        or of the output's (the engine sums broadcast axes), or None for no gradient. A
        single input may return a bare array. Subclasses define this."""
        raise NotImplementedError(f"{type(self).__name__}.backward is not defined")

    @classmethod
    def apply(cls, *args, **params):
        """Run the op on ``args`` (Tensors are unwrapped to their arrays, anything else is
        passed through) with keyword ``params``, and return the output Tensor. When grad
        mode is on and some input requires grad, the call is recorded on the output so
        ``backward`` reaches the inputs."""
        Tensor = _tensor_class
        fn = cls.__new__(cls)
        arrays = []
        needs = []
        any_needs = False
        for a in args:
            if isinstance(a, Tensor):
                arrays.append(a._data)
                r = a.requires_grad
                needs.append(r)
                any_needs = any_needs or r
            else:
                arrays.append(a)
                needs.append(False)
        record = any_needs and _grad_enabled
        fn.needs_input_grad = tuple(needs) if record else (False,) * len(needs)
        fn._released = False
        out = fn.forward(*arrays, **params)
        if type(out) is not np.ndarray:
            out = np.asarray(out)
        if record:
            fn.parents = args
            fn._epoch = _mutations
            return Tensor._make(out, True, fn)
        return Tensor._make(out, False, None)

    def release(self) -> None:
        """Free what forward saved, and the links to the inputs, so intermediate outputs die
        as soon as backward has passed them; a later backward through this node raises."""
        self._released = True
        self.parents = ()
        d = getattr(self, "__dict__", None)
        if d:
            d.clear()


def _unbroadcast(grad: np.ndarray, shape: tuple, who: str) -> np.ndarray:
    """Sum ``grad`` down to ``shape`` (undo NumPy broadcasting)."""
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    if extra < 0:
        if grad.size == int(np.prod(shape)):
            return grad.reshape(shape)
        raise ValueError(f"{who}.backward returned a gradient of shape {grad.shape} "
                         f"for an input of shape {shape}")
    axes = list(range(extra))
    for i, n in enumerate(shape):
        g = grad.shape[extra + i]
        if n == 1 and g != 1:
            axes.append(extra + i)
        elif n != g:
            raise ValueError(f"{who}.backward returned a gradient of shape {grad.shape} "
                             f"that does not broadcast to the input shape {shape}")
    if axes:
        grad = grad.sum(axis=tuple(axes), keepdims=True)
    return grad.reshape(shape)


def _reduce_broadcast_grad(grad, shape) -> np.ndarray:
    """``grad`` summed down to ``shape``: over its extra leading axes, then (kept) over the
    axes where ``shape`` has size 1 (upstream TinyTorch's name for ``_unbroadcast``, the one
    reduction every Function's gradient goes through).

    Args:
        grad: an array of a shape ``shape`` broadcasts to.
        shape: the target shape.
    """
    return _unbroadcast(np.asarray(grad), tuple(shape), "_reduce_broadcast_grad")


def _saves(fn, arr) -> bool:
    """Did ``fn`` keep ``arr`` (itself, a view of it, or inside a tuple) for its backward?"""
    for v in fn.__dict__.values():
        for x in (v if type(v) in (tuple, list) else (v,)):
            if x is arr or (isinstance(x, np.ndarray) and x.base is not None and x.base is arr):
                return True
    return False


def bump_version(t) -> None:
    """Record that ``t``'s data changed in place (call after writing into ``t.data``)."""
    global _mutations
    _mutations += 1
    t._version = _mutations


def _check_versions(ctx, out) -> None:
    """Raise if an array ``ctx`` saved in forward was changed in place since then."""
    changed = [(f"input {i}", p) for i, p in enumerate(ctx.parents)
               if isinstance(p, _tensor_class) and p._version > ctx._epoch] + \
              ([("its output", out)] if out._version > ctx._epoch else [])
    for what, t in changed:
        if _saves(ctx, t._data):
            raise RuntimeError(
                f"backward: {what} of {type(ctx).__name__} (shape {t._data.shape}), saved for the "
                "gradient, was modified in place after the forward pass, so the gradient would use "
                "the new values. Recompute the forward after changing it (e.g. call "
                "optimizer.step() only after backward), or change a copy.")


def _topological_order(root):
    """Tensors reachable from root through recorded Functions, inputs before users."""
    order = []
    visited = set()
    stack = [(root, False)]
    while stack:
        t, expanded = stack.pop()
        if expanded:
            order.append(t)
            continue
        if id(t) in visited:
            continue
        visited.add(id(t))
        stack.append((t, True))
        ctx = t._ctx
        if ctx is not None:
            inner = []
            for p, need in zip(ctx.parents, ctx.needs_input_grad):
                if need and id(p) not in visited:
                    if p._ctx is None:  # a leaf goes below its siblings: it lands later in `order`,
                        stack.append((p, False))  # so the walk reaches it as soon as its users are done
                    else:                         # (gradient-ready hooks fire early; sums are unchanged)
                        inner.append((p, False))
            stack.extend(inner)
    return order


def run_backward(root, gradient=None, retain_graph: bool = False) -> None:
    """Accumulate d(root)/d(leaf) into ``leaf.grad`` for every leaf that requires grad.

    Args:
        root: the Tensor to differentiate (it must require grad).
        gradient: d(output)/d(root), an array or Tensor of root's shape (for a leaf root,
            also a shape it broadcasts to: summed down by ``_reduce_broadcast_grad``); None is allowed only
            for a one-element root and means 1.
        retain_graph: keep the Functions' saved arrays so the graph can be walked again;
            by default each node is released once backward has passed it.
    """
    if not root.requires_grad:
        raise RuntimeError("backward: the tensor does not require grad and has no grad_fn "
                           "(was it computed under no_grad, or from tensors without requires_grad=True?)")
    data = root.data
    if gradient is None:
        if data.size != 1:
            raise ValueError(f"backward: grad can be implicitly created only for scalar outputs; "
                             f"got shape {data.shape}: pass gradient= of that shape")
        gradient = np.ones_like(data)
    else:
        if isinstance(gradient, _tensor_class):
            gradient = gradient.data
        gradient = np.asarray(gradient, dtype=data.dtype)
        if gradient.shape != data.shape:
            # On a leaf, a gradient of the shape the leaf broadcasts to (upstream TinyTorch's
            # leaf accumulation, as if the leaf had been broadcast first) is summed down to the
            # leaf's shape. A computed tensor's gradient must match its shape, as in PyTorch
            # and upstream: a mismatched seed there is a mistake, not a broadcast.
            try:
                broadcasts = np.broadcast_shapes(data.shape, gradient.shape) == gradient.shape
            except ValueError:
                broadcasts = False
            if not (broadcasts and root.grad_fn is None):
                why = "a computed tensor's gradient must match its shape" if broadcasts else \
                    "nor does the tensor broadcast to it"
                raise ValueError(f"backward: gradient has shape {gradient.shape} but the tensor has "
                                 f"shape {data.shape} ({why})")
            gradient = _reduce_broadcast_grad(gradient, data.shape)

    order = _topological_order(root)
    grads = {id(root): gradient}
    # arrays already stored in some leaf's .grad during this pass. The caller's gradient
    # counts as one: a leaf it reaches copies it (the caller keeps its array), while
    # Functions only read it, so it is not copied up front (a full read and write of the
    # output's size saved per backward)
    stored = {id(gradient)}
    # Sums of gradients made here (fresh arrays no Function and no caller holds): a third
    # and later contribution to the same tensor is added into them in place. The arrays stay
    # alive in `grads` while their id is in `owned`, so an id cannot be reused meanwhile.
    owned = set()
    # Walk users before inputs. Each entry is dropped once handled and each node releases
    # its inputs, so (without retain_graph) an intermediate output is freed as soon as its
    # gradient has been passed on: peak memory during backward falls as it proceeds.
    for i in range(len(order) - 1, -1, -1):
        t = order[i]
        order[i] = None
        g = grads.pop(id(t), None)
        if g is None:
            continue
        owned.discard(id(g))  # from here on a Function or a leaf may hold it
        ctx = t._ctx
        if ctx is None:
            _accumulate_leaf(t, g, stored)
            continue
        if ctx._released:
            raise RuntimeError(
                f"Trying to backward through the graph a second time ({type(ctx).__name__} was "
                "already released). Pass retain_graph=True to the first backward if you need to "
                "backward twice.")
        if ctx._epoch != _mutations:  # something changed in place since this forward
            _check_versions(ctx, t)
        in_grads = ctx.backward(g)
        if type(in_grads) is not tuple:
            in_grads = tuple(in_grads) if isinstance(in_grads, list) else (in_grads,)
        parents = ctx.parents
        if len(in_grads) != len(parents):
            raise ValueError(f"{type(ctx).__name__}.backward returned {len(in_grads)} gradients "
                             f"for {len(parents)} inputs")
        for p, need, pg in zip(parents, ctx.needs_input_grad, in_grads):
            if not need or pg is None:
                continue
            if type(pg) is not np.ndarray:
                pg = np.asarray(pg)
            pshape = p._data.shape
            if pg.shape != pshape:
                pg = _unbroadcast(pg, pshape, type(ctx).__name__)
            key = id(p)
            prev = grads.get(key)
            if prev is not None:
                if id(prev) in owned and prev.shape == pg.shape and \
                        np.result_type(prev, pg) == prev.dtype:
                    np.add(prev, pg, out=prev)  # a sum this pass made: nobody else holds it
                    continue
                pg = prev + pg
                if type(pg) is not np.ndarray:  # 0-d + 0-d gives a NumPy scalar
                    pg = np.asarray(pg)
                owned.add(id(pg))
            grads[key] = pg
        if not retain_graph:
            ctx.release()


def _accumulate_leaf(t, g: np.ndarray, stored: set) -> None:
    if not t.requires_grad:
        return
    dtype = t.data.dtype
    if g.dtype != dtype:
        g = g.astype(dtype)
    elif not (g.flags.owndata and g.flags.writeable) or id(g) in stored:
        # a view, a read-only broadcast, or an array another leaf already holds:
        # copy so in-place updates of one .grad never touch another.
        g = g.copy()
    stored.add(id(g))
    if t.grad is None:
        t.grad = g
    else:
        # a fresh array (another leaf or the caller may hold the old one); asarray because
        # 0-d + 0-d gives a NumPy scalar, which in-place updates (clipping, Adam) cannot change
        t.grad = np.asarray(t.grad + g, dtype=dtype)
    if _leaf_hooks:
        hooks = t.__dict__.get("_post_accumulate_grad_hooks")
        if hooks:
            for hook in tuple(hooks.values()):
                hook(t)


class _HookHandle:
    """What ``register_post_accumulate_grad_hook`` returns: ``remove()`` unregisters the hook."""

    __slots__ = ("_hooks", "_key")

    def __init__(self, hooks: dict, key: int):
        self._hooks, self._key = hooks, key

    def remove(self) -> None:
        """Unregister the hook (a second call does nothing)."""
        global _leaf_hooks
        if self._hooks.pop(self._key, None) is not None:
            _leaf_hooks -= 1


_hook_keys = iter(range(1 << 62))


def register_post_accumulate_grad_hook(tensor, hook) -> _HookHandle:
    """Call ``hook(tensor)`` each backward once ``tensor.grad`` is final for that pass.

    Args:
        tensor: a leaf Tensor that requires grad (a Parameter); only leaves get ``.grad``.
        hook: a callable taking the tensor; its return value is ignored. Hooks of one
            tensor run in registration order.
    """
    global _leaf_hooks
    if not isinstance(tensor, _tensor_class):
        raise TypeError(f"register_post_accumulate_grad_hook: expected a Tensor, got {type(tensor).__name__}")
    if not callable(hook):
        raise TypeError(f"register_post_accumulate_grad_hook: hook must be callable, got {type(hook).__name__}")
    if not tensor.requires_grad or tensor._ctx is not None:
        raise ValueError("register_post_accumulate_grad_hook: only a leaf tensor that requires grad "
                         "gets a .grad (this one is computed, or has requires_grad=False)")
    hooks = tensor.__dict__.setdefault("_post_accumulate_grad_hooks", {})
    key = next(_hook_keys)
    hooks[key] = hook
    _leaf_hooks += 1
    return _HookHandle(hooks, key)


# --------------------------------------------------------------------------- gradcheck

def gradcheck(fn, *inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              seed: int = 0, raise_exception: bool = True) -> bool:
    """Compare backward with float64 central differences.

    ``fn(*tensors)`` must return a Tensor. Inputs may be Tensors or arrays; they are
    copied to float64. The checked inputs are the Tensors with ``requires_grad=True``
    (all floating inputs when none asks). Instead of the full Jacobian, the check uses a
    fixed random projection ``L = sum(w * fn(x))``: backward gives dL/dx in one pass and
    each input element costs two forward evaluations. Returns True, or raises
    AssertionError naming the input, the element and both values (False when
    ``raise_exception=False``).

    Args:
        fn: the function under test, taking the inputs in order.
        inputs: Tensors, arrays or other arguments passed to ``fn``.
        eps: finite-difference step (on the float64 copies).
        atol, rtol: an element passes when |analytic - numeric| <= atol + rtol * |numeric|.
        seed: seed of the random projection weights ``w``.
        raise_exception: raise AssertionError on a mismatch (True) or return False.
    """
    Tensor = _tensor_class
    explicit = any(isinstance(x, Tensor) and x.requires_grad for x in inputs)
    values, checked, was_tensor = [], [], []
    for x in inputs:
        is_tensor = isinstance(x, Tensor)
        arr = x.data if is_tensor else x
        floating = isinstance(arr, np.ndarray) and np.issubdtype(arr.dtype, np.floating)
        values.append(np.array(arr, dtype=np.float64) if floating else x)
        checked.append(floating and (x.requires_grad if explicit else True) if is_tensor
                       else floating and not explicit)
        was_tensor.append(is_tensor or (floating and not explicit))
    if not any(checked):
        raise ValueError("gradcheck: no floating-point input to check")

    def make_args(requires):
        args = []
        for v, t, r in zip(values, was_tensor, requires):
            if t and isinstance(v, np.ndarray):
                args.append(Tensor(v, requires_grad=r, dtype=v.dtype if np.issubdtype(v.dtype, np.floating) else None))
            else:
                args.append(v)
        return args

    def evaluate():
        with set_grad_enabled(False):
            out = fn(*make_args([False] * len(values)))
        return np.asarray(out.data if isinstance(out, Tensor) else out, dtype=np.float64)

    with set_grad_enabled(True):
        args = make_args(checked)
        out = fn(*args)
    if not isinstance(out, Tensor):
        raise TypeError(f"gradcheck: fn must return a Tensor, got {type(out).__name__}")
    if out.data.dtype != np.float64:
        raise TypeError(f"gradcheck: fn returned {out.data.dtype} for float64 inputs; "
                        "the check needs float64 all the way through")
    w = np.random.default_rng(seed).standard_normal(out.shape)
    if out.requires_grad:
        out.backward(w)

    ok = True
    message = ""
    for i, (v, c) in enumerate(zip(values, checked)):
        if not c:
            continue
        analytic = args[i].grad
        analytic = np.zeros_like(v) if analytic is None else analytic
        numeric = np.zeros_like(v)
        flat = v.reshape(-1)  # values[i] is a fresh contiguous copy, so this is a view
        for k in range(flat.size):
            orig = flat[k]
            flat[k] = orig + eps
            plus = float(np.sum(evaluate() * w))
            flat[k] = orig - eps
            minus = float(np.sum(evaluate() * w))
            flat[k] = orig
            numeric.reshape(-1)[k] = (plus - minus) / (2 * eps)
        bad = ~(np.abs(analytic - numeric) <= atol + rtol * np.abs(numeric))  # NaN fails too
        if bad.any():
            k = int(np.flatnonzero(bad.reshape(-1))[0])
            idx = np.unravel_index(k, v.shape)
            ok = False
            message = (f"gradcheck: input {i} (shape {v.shape}) element {tuple(int(j) for j in idx)}: "
                       f"backward gives {analytic.reshape(-1)[k]:.8g}, finite differences give "
                       f"{numeric.reshape(-1)[k]:.8g} (atol={atol}, rtol={rtol}); "
                       f"{int(bad.sum())} of {bad.size} elements disagree")
            break
    if not ok and raise_exception:
        raise AssertionError(message)
    return ok
