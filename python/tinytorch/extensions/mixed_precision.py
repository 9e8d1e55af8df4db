"""Mixed precision: float16 forward and backward with float32 master weights.

Bottleneck it removes: bytes moved per step. Activations, weights and gradients in float16
take half the memory and half the memory bandwidth of float32, which is what bounds most
training steps once GEMMs are fast. Two numerical problems come with it, and this file
and ``loss_scaler.py`` handle them:

  * small gradients underflow in float16 (below ~6e-8 they are 0): a loss scaler lifts
    them before backward and removes the scale in float32 afterwards;
  * small updates vanish against float16 weights (float16 has an 11-bit significand, so
    ``w + u == w`` whenever ``|u| < |w| * 2^-11``): the optimizer keeps a float32 "master"
    copy of every trained weight, updates that, and writes a float16 copy back for the
    next forward.

What this file owns
  * ``to_half(model)`` / ``to_float(model)``: cast every floating parameter of a model in
    place (build the optimizer afterwards). Inputs must be float16 too (token ids need
    nothing: the embedding output is float16); results of ops keep NumPy's dtype
    promotion, so a float16 model on float16 inputs runs in float16 all the way through.
  * ``MixedPrecisionOptimizer(params, optimizer_cls=AdamW, **kwargs)``: an ``Optimizer``
    whose ``.params`` are float32 master copies of the trainable float16 parameters (a
    float32 parameter is its own master). ``sync_grads()`` copies float16 gradients into
    float32 master gradients (the loss scalers call it before unscaling), ``step()``
    runs the wrapped optimizer on the masters and writes the results back into the model's
    float16 arrays, ``zero_grad()`` clears both.

Typical step::

    model = to_half(model)
    opt = MixedPrecisionOptimizer(model.parameters(), AdamW, lr=3e-4)
    scaler = DynamicLossScaler()
    loss = loss_fn(model(x_half).astype(np.float32), y)   # the loss itself in float32
    scaler.scale(loss).backward()                         # float16 backward
    scaler.step(opt); scaler.update()                     # unscale in float32, skip on overflow
    opt.zero_grad()

No native path here: float16 matmuls go through ``core.acceleration`` like every other
matmul, so a native float16 GEMM (f16 storage, f32 accumulation) speeds this up without a
change to this file; ``acceleration.last_path()`` reports which ran.

Assumes: the core's optimizers (AdamW by default) for the float32 master update, and
``bump_version`` to mark the float16 copies as changed.
"""
from __future__ import annotations

import numpy as np

from ..core.autograd import bump_version
from ..core.layers import Layer
from ..core.optimizers import AdamW, Optimizer
from ..core.tensor import Tensor

__all__ = ["to_half", "to_float", "cast_parameters", "MixedPrecisionOptimizer"]


def cast_parameters(model: Layer, dtype) -> Layer:
    """Cast every floating parameter of ``model`` to ``dtype`` in place; gradients are
    dropped (they would have the old dtype). Returns the model."""
    if not isinstance(model, Layer):
        raise TypeError(f"cast_parameters: expected a Layer, got {type(model).__name__}")
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"cast_parameters: dtype must be floating, got {dtype}")
    for _, p in model.named_parameters():
        if p.data.dtype.kind == "f" and p.data.dtype != dtype:
            p.data = p.data.astype(dtype)
            p.grad = None
    return model


def to_half(model: Layer) -> Layer:
    """Cast the model's floating parameters to float16 in place. Returns the model."""
    return cast_parameters(model, np.float16)


def to_float(model: Layer) -> Layer:
    """Cast the model's floating parameters to float32 in place. Returns the model."""
    return cast_parameters(model, np.float32)


class MixedPrecisionOptimizer(Optimizer):
    """Float32 master weights for a float16 model (see the module docstring).

    Args:
        params: the model's parameters (or the model); trainable float16 ones get a float32
            master copy, float32 ones are their own master, frozen ones are ignored.
        optimizer_cls: the Optimizer class run on the masters (AdamW by default).
        optimizer_kwargs: its keyword arguments (lr, betas, weight_decay, ...).

    ``params`` of this object are the masters; ``model_params`` the model's own Tensors.
    """

    def __init__(self, params, optimizer_cls=AdamW, **optimizer_kwargs):
        if isinstance(optimizer_cls, Optimizer) or not (isinstance(optimizer_cls, type)
                                                        and issubclass(optimizer_cls, Optimizer)):
            raise TypeError("MixedPrecisionOptimizer: optimizer_cls must be an Optimizer class "
                            f"(e.g. AdamW), got {optimizer_cls!r}")
        if hasattr(params, "parameters") and callable(params.parameters):
            params = params.parameters()
        params = [params] if isinstance(params, Tensor) else list(params)
        model_params = [p for p in params if isinstance(p, Tensor) and p.requires_grad]
        others = [p for p in params if not isinstance(p, Tensor)]
        if others:
            raise TypeError(f"MixedPrecisionOptimizer: parameters must be Tensors, got "
                            f"{type(others[0]).__name__}")
        for p in model_params:
            if p.data.dtype not in (np.float16, np.float32):
                raise TypeError(f"MixedPrecisionOptimizer: parameters must be float16 or float32, got "
                                f"{p.data.dtype} for shape {p.data.shape}")
        if not model_params:
            raise ValueError("MixedPrecisionOptimizer: no trainable parameters")
        self.model_params = model_params
        masters = [p if p.data.dtype == np.float32 else Tensor(p.data.astype(np.float32), requires_grad=True)
                   for p in model_params]
        self.inner = None
        super().__init__(masters, optimizer_kwargs.get("lr", 1e-3))
        self.inner = optimizer_cls(masters, **optimizer_kwargs)
        self.state = self.inner.state
        self._synced = False

    # lr lives in the wrapped optimizer, so schedulers attached to this one drive it.
    @property
    def lr(self):
        """The wrapped optimizer's learning rate (setting it sets the wrapped one's)."""
        return self.inner.lr if self.inner is not None else self._lr

    @lr.setter
    def lr(self, value):
        self._lr = float(value)
        if self.inner is not None:
            self.inner.lr = float(value)

    def sync_grads(self) -> None:
        """Copy float16 model gradients into float32 master gradients (once per step)."""
        if self._synced:
            return
        for p, m in zip(self.model_params, self.params):
            if m is not p:
                m.grad = None if p.grad is None else p.grad.astype(np.float32)
        self._synced = True

    def step(self) -> None:
        """Sync gradients, step the wrapped optimizer on the float32 masters and write them
        back (rounded) into the model's float16 arrays."""
        self.sync_grads()
        self.step_count += 1
        self.inner.step()
        for p, m in zip(self.model_params, self.params):
            if m is not p:
                np.copyto(p.data, m.data, casting="same_kind")
                bump_version(p)  # written in place, like the inner optimizer's update
        self._synced = False

    def zero_grad(self) -> None:
        """Clear the gradients of both the model parameters and the masters."""
        for p in self.model_params:
            p.grad = None
        for m in self.params:
            m.grad = None
        self._synced = False

    def state_dict(self) -> dict:
        """The wrapped optimizer's state, copies of the float32 masters and the step count."""
        return {"inner": self.inner.state_dict(), "master": [m.data.copy() for m in self.params],
                "step_count": self.step_count}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a ``state_dict()``: the wrapped optimizer's state and the masters (copied
        back into the float16 model too)."""
        masters = state_dict.get("master")
        if masters is None or "inner" not in state_dict:
            raise KeyError(f"MixedPrecisionOptimizer.load_state_dict: expected keys 'inner' and 'master', "
                           f"got {sorted(state_dict)}")
        if len(masters) != len(self.params):
            raise ValueError(f"MixedPrecisionOptimizer.load_state_dict: {len(masters)} master arrays for "
                             f"{len(self.params)} parameters")
        for i, (m, arr) in enumerate(zip(self.params, masters)):
            if np.shape(arr) != m.data.shape:
                raise ValueError(f"MixedPrecisionOptimizer.load_state_dict: master {i} has shape "
                                 f"{np.shape(arr)} but the parameter has shape {m.data.shape}")
        self.inner.load_state_dict(state_dict["inner"])
        self.state = self.inner.state
        for p, m, arr in zip(self.model_params, self.params, masters):
            np.copyto(m.data, np.asarray(arr), casting="unsafe")
            if m is not p:
                np.copyto(p.data, m.data, casting="same_kind")
        self.step_count = int(state_dict.get("step_count", 0))

    def __repr__(self):
        return f"MixedPrecisionOptimizer({self.inner!r}, {len(self.params)} master weights)"
