"""Loss scaling: keep small float16 gradients from flushing to zero (the optimizer boundary).

Bottleneck it removes: float16's narrow exponent range. The smallest float16 subnormal is
2^-24 ~ 5.96e-8 and precision degrades below the smallest normal 2^-14 ~ 6.1e-5, so a
gradient of 1e-7 becomes 1.19e-7 (or 0) and one of 2e-9 becomes exactly 0: those weights
stop learning. Multiplying the loss by S (2^16 by default) before backward multiplies
every gradient by S on the way down (the chain rule is linear in the upstream gradient),
lifting them into float16's normal range; dividing by S in float32 before the optimizer
step restores the true values. Too large an S overflows (float16 max is 65504): the
dynamic scaler detects inf/NaN, skips that step, and halves S; after ``growth_interval``
clean steps it doubles S again, so S tracks the largest safe value.

What this file owns
  * ``LossScaler(scale=65536.0)``: a fixed scale.
  * ``DynamicLossScaler(init_scale=2**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000)``: the adaptive one.
  Both: ``scale(loss)`` (the scaled loss, a float32 Tensor), ``backward(loss)``,
  ``unscale_(optimizer)``, ``step(optimizer)``, ``update()``, ``get_scale()``,
  ``state_dict()``/``load_state_dict()``; the interface mirrors ``torch.amp.GradScaler``.

Per-step protocol (as in PyTorch)::

    scaler.scale(loss).backward()      # or scaler.backward(loss)
    scaler.unscale_(optimizer)         # optional: e.g. to clip true gradients
    scaler.step(optimizer)             # unscales if needed; skips on inf/NaN
    scaler.update()                    # dynamic: adjust the scale

``unscale_`` divides the gradients of ``optimizer.params`` by S once; a second call before
``update()`` (or, for the fixed scaler, before ``step()``) raises RuntimeError instead of
dividing twice. The fixed scaler has nothing to adapt, so its ``step()`` also ends the
iteration (its ``update()`` is accepted and does nothing more), which keeps the two-line
loop ``scaler.backward(loss); scaler.step(opt)`` correct. An optimizer that keeps its
gradients elsewhere (``MixedPrecisionOptimizer``: float16 model gradients, float32 master
copies) exposes ``sync_grads()``; ``unscale_`` calls it first, so unscaling happens in
float32 where the true small values are representable.

Overflow detection is one reduction per gradient array (a sum, which is inf/NaN exactly
when some element is, barring a float32 overflow of the sum itself, which float16 inputs
cannot reach); unscaling is one in-place multiply. No native path: both are single
vectorised NumPy passes over the gradients.

Assumes: only the core's Tensor and NumPy.
"""
from __future__ import annotations

import numpy as np

from ..core.tensor import Tensor

__all__ = ["LossScaler", "DynamicLossScaler", "grads_are_finite"]


def grads_are_finite(grads) -> bool:
    """True when no array in ``grads`` holds inf or NaN (one reduction pass per array)."""
    for g in grads:
        if g is None or g.size == 0:
            continue
        acc = np.float64 if g.dtype == np.float64 else np.float32
        with np.errstate(over="ignore", invalid="ignore"):
            total = np.sum(g, dtype=acc)
        # A non-finite sum means a non-finite element, or (rarely, never for float16 input)
        # a sum that overflowed: only then look at the elements.
        if not np.isfinite(total) and not np.isfinite(g).all():
            return False
    return True


class LossScaler:
    """Fixed loss scale (see the module docstring for the protocol): ``torch.amp.GradScaler``'s
    interface with a constant S (no growth, no back-off; steps with inf/NaN are still skipped).

    Args:
        scale: the factor S the loss is multiplied by, positive and finite (2^16 default).

    ``steps_skipped`` counts steps skipped for inf/NaN gradients; ``history`` has one dict
    per ``step()`` (scale, found_inf, skipped).
    """

    def __init__(self, scale: float = 65536.0):
        scale = float(scale)
        if not np.isfinite(scale) or scale <= 0:
            raise ValueError(f"{type(self).__name__}: scale must be a positive finite number, got {scale}")
        self._scale = scale
        self._per_optimizer = {}   # id(optimizer) -> {"unscaled": bool, "found_inf": bool, "stepped": bool}
        self.steps_skipped = 0
        self.history = []          # one dict per step(): scale, found_inf, skipped

    # -------------------------------------------------------------- scaling the loss
    def get_scale(self) -> float:
        """The current scale S."""
        return self._scale

    def scale(self, loss):
        """``loss * S`` as a float32 Tensor (a float16 loss is cast first, since S itself
        may exceed float16's range). Arrays and numbers are scaled the same way."""
        if isinstance(loss, Tensor):
            if loss.data.dtype != np.float32 and loss.data.dtype != np.float64:
                loss = loss.astype(np.float32)
            return loss * self._scale
        return np.asarray(loss, dtype=np.float32) * np.float32(self._scale)

    def backward(self, loss, retain_graph: bool = False) -> None:
        """``scale(loss).backward(retain_graph=retain_graph)``: backpropagate the scaled
        ``loss`` (a scalar Tensor), so every gradient is multiplied by S."""
        if not isinstance(loss, Tensor):
            raise TypeError(f"{type(self).__name__}.backward: expected a Tensor loss, got {type(loss).__name__}")
        self.scale(loss).backward(retain_graph=retain_graph)

    # -------------------------------------------------------------- gradients
    def _state(self, optimizer) -> dict:
        if not hasattr(optimizer, "params"):
            raise TypeError(f"{type(self).__name__}: expected an optimizer with .params, got "
                            f"{type(optimizer).__name__}")
        return self._per_optimizer.setdefault(id(optimizer), {"unscaled": False, "found_inf": False,
                                                              "stepped": False})

    def unscale_(self, optimizer) -> bool:
        """Divide the optimizer's gradients by S in place, once per step. Returns True when
        they are all finite."""
        state = self._state(optimizer)
        if state["stepped"]:
            raise RuntimeError(f"{type(self).__name__}.unscale_() is being called after step() in the "
                               "same iteration; call update() first")
        if state["unscaled"]:
            raise RuntimeError(f"{type(self).__name__}.unscale_() has already been called on this "
                               "optimizer since the last update(); a second call would divide twice")
        sync = getattr(optimizer, "sync_grads", None)
        if callable(sync):
            sync()
        grads = [p.grad for p in optimizer.params if p.grad is not None]
        finite = grads_are_finite(grads)
        if finite:
            inv = 1.0 / self._scale
            for g in grads:
                g *= np.asarray(inv, dtype=g.dtype)
        state["unscaled"] = True
        state["found_inf"] = not finite
        return finite

    def step(self, optimizer, *args, **kwargs):
        """Unscale (if not done yet) and call ``optimizer.step()``, unless a gradient is inf
        or NaN: then the step is skipped (returns None) and the weights are untouched."""
        state = self._state(optimizer)
        if state["stepped"]:
            raise RuntimeError(f"{type(self).__name__}.step() was already called for this optimizer; "
                               "call update() before the next step")
        if not state["unscaled"]:
            self.unscale_(optimizer)
        result = None
        skipped = state["found_inf"]
        if skipped:
            self.steps_skipped += 1
        else:
            result = optimizer.step(*args, **kwargs)
        state["stepped"] = True
        self.history.append({"scale": self._scale, "found_inf": skipped, "skipped": skipped})
        self._after_step()
        return result

    def _after_step(self) -> None:
        # A fixed scale has nothing to adapt: the iteration ends at step().
        self._per_optimizer.clear()

    def update(self, new_scale=None) -> None:
        """End the iteration; ``new_scale`` (a positive number or one-element Tensor), when
        given, replaces the scale."""
        if new_scale is not None:
            new_scale = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
            if not np.isfinite(new_scale) or new_scale <= 0:
                raise ValueError(f"{type(self).__name__}.update: new_scale must be positive and finite, "
                                 f"got {new_scale}")
            self._scale = new_scale
        self._per_optimizer.clear()

    def found_inf(self, optimizer) -> bool:
        """Whether the last unscale_ of this optimizer (this iteration) saw inf/NaN."""
        return self._per_optimizer.get(id(optimizer), {}).get("found_inf", False)

    # -------------------------------------------------------------- state
    def state_dict(self) -> dict:
        """``{"scale": S}``, for checkpoints."""
        return {"scale": self._scale}

    def load_state_dict(self, state: dict) -> None:
        """Restore the scale from a ``state_dict()`` ``state``; KeyError without "scale"."""
        if "scale" not in state:
            raise KeyError(f"{type(self).__name__}.load_state_dict: missing key 'scale' (got {sorted(state)})")
        self._scale = float(state["scale"])

    def __repr__(self):
        return f"{type(self).__name__}(scale={self._scale:g})"


class DynamicLossScaler(LossScaler):
    """Loss scale that backs off on overflow and grows after ``growth_interval`` clean steps
    (``torch.amp.GradScaler``'s rule).

    Args:
        init_scale: the starting scale S (2^16).
        growth_factor: S is multiplied by this (> 1) after ``growth_interval`` consecutive
            steps without inf/NaN gradients.
        backoff_factor: S is multiplied by this (in (0, 1)) in an iteration that found
            inf/NaN; that step is skipped.
        growth_interval: clean steps between growths, a positive int.
    """

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000):
        super().__init__(init_scale)
        if not growth_factor > 1.0:
            raise ValueError(f"DynamicLossScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"DynamicLossScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, (int, np.integer)) \
                or growth_interval < 1:
            raise ValueError(f"DynamicLossScaler: growth_interval must be a positive int, got {growth_interval!r}")
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self._growth_tracker = 0   # consecutive clean steps since the last change

    def _after_step(self) -> None:
        pass  # the iteration ends at update(), which needs this step's found_inf

    def update(self, new_scale=None) -> None:
        """Back off on overflow in this iteration (and reset the clean-step counter), or
        count a clean step and grow the scale every ``growth_interval`` of them.
        ``new_scale``, when given, sets the scale instead and resets the counter."""
        if new_scale is not None:
            super().update(new_scale)
            self._growth_tracker = 0
            return
        states = list(self._per_optimizer.values())
        if not states:
            raise RuntimeError("DynamicLossScaler.update(): no unscale_() or step() happened in this "
                               "iteration, so there is nothing to update from")
        if any(s["found_inf"] for s in states):
            self._scale *= self.backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self.growth_interval:
                grown = self._scale * self.growth_factor
                if np.isfinite(np.float32(grown)):  # keep the scale representable in float32
                    self._scale = grown
                self._growth_tracker = 0
        self._per_optimizer.clear()

    def state_dict(self) -> dict:
        """Scale, factors, interval and the clean-step counter, for checkpoints."""
        return {"scale": self._scale, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state: dict) -> None:
        """Restore every field of a ``state_dict()`` ``state``; KeyError names missing keys."""
        missing = [k for k in ("scale", "growth_factor", "backoff_factor", "growth_interval",
                               "_growth_tracker") if k not in state]
        if missing:
            raise KeyError(f"DynamicLossScaler.load_state_dict: missing keys {missing}")
        self._scale = float(state["scale"])
        self.growth_factor = float(state["growth_factor"])
        self.backoff_factor = float(state["backoff_factor"])
        self.growth_interval = int(state["growth_interval"])
        self._growth_tracker = int(state["_growth_tracker"])

    def __repr__(self):
        return (f"DynamicLossScaler(scale={self._scale:g}, growth_factor={self.growth_factor:g}, "
                f"backoff_factor={self.backoff_factor:g}, growth_interval={self.growth_interval})")
