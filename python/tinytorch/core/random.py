"""The framework's one source of randomness.

What this file owns: a single ``numpy.random.Generator`` used by parameter
initialisation, dropout masks and DataLoader shuffling (when no seed is given), so
``manual_seed(s)`` makes a whole run repeatable and ``get_rng_state()`` /
``set_rng_state()`` let a checkpoint (or activation recomputation) replay dropout
masks exactly.

What it never does: touch NumPy's global ``np.random`` state; user code that calls
``np.random.*`` is its own business.

The generator starts from OS entropy (like NumPy); ``initial_seed()`` reports the
seed in use so a run can be logged and repeated.

What it assumes: NumPy's ``Generator`` / ``PCG64`` (the state is that bit generator's state
dict); callers ask ``get_generator()`` at each draw and keep no reference to it (``manual_seed``
replaces the generator).
"""
from __future__ import annotations

import copy

import numpy as np

__all__ = ["manual_seed", "seed", "initial_seed", "get_generator", "get_rng_state", "set_rng_state",
           "fork_rng"]

_initial_seed = int(np.random.SeedSequence().entropy % (2 ** 63))
_generator = np.random.Generator(np.random.PCG64(_initial_seed))


def manual_seed(seed: int) -> np.random.Generator:
    """Reseed the framework generator with ``seed`` (a non-negative int); returns it.
    Initialisation, dropout and unseeded DataLoader shuffling then repeat exactly."""
    global _generator, _initial_seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"manual_seed: seed must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"manual_seed: seed must be non-negative, got {seed}")
    _initial_seed = int(seed)
    _generator = np.random.Generator(np.random.PCG64(_initial_seed))
    return _generator


def seed() -> int:
    """Reseed from OS entropy and return the new seed."""
    manual_seed(int(np.random.SeedSequence().entropy % (2 ** 63)))
    return _initial_seed


def initial_seed() -> int:
    """The seed the framework generator was last seeded with (OS entropy at import,
    unless ``manual_seed``/``seed`` ran since)."""
    return _initial_seed


def get_generator() -> np.random.Generator:
    """The generator every framework component draws from (look it up at use time)."""
    return _generator


def get_rng_state() -> dict:
    """A copy of the generator state (plain dict of ints and strings; JSON-serialisable)."""
    return copy.deepcopy(_generator.bit_generator.state)


def set_rng_state(state: dict) -> None:
    """Restore ``state``, a dict from ``get_rng_state`` (the generator continues from it)."""
    if not isinstance(state, dict) or "bit_generator" not in state:
        raise TypeError("set_rng_state: expected the dict returned by get_rng_state()")
    if state["bit_generator"] != type(_generator.bit_generator).__name__:
        raise ValueError(f"set_rng_state: state is for {state['bit_generator']}, the framework uses "
                         f"{type(_generator.bit_generator).__name__}")
    _generator.bit_generator.state = copy.deepcopy(state)


class fork_rng:
    """``with fork_rng():`` restores the generator state on exit."""

    def __enter__(self):
        self.state = get_rng_state()
        return self

    def __exit__(self, *exc):
        set_rng_state(self.state)
        return False
