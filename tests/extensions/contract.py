"""The extension contract, as a reusable checker every extension test calls.

What it checks (each is its own function so a test uses the ones that apply; the
one-call ``check_contract`` runs all of them):

  check_ndarray_in_ndarray_out   ndarray inputs give an ndarray (not a Tensor), equal to
                                 the reference when one is given
  check_tensor_in_tensor_out     Tensor inputs give a Tensor that is on the tape
                                 (requires_grad, grad_fn) and whose backward reaches every
                                 input that requires grad, with the input's shape
  check_gradcheck                tinytorch.core.autograd.gradcheck on float64 copies
  check_native_parity            the same values and gradients with the native path
                                 disabled (the fallback is the reference the fast path
                                 must match)
  check_path_report              the path report names what ran: the fallback name under
                                 ``disable_native`` and, when a native path is expected to
                                 be available, a native name otherwise

Conventions: ``fn(*inputs)`` is the operation under test; ``inputs`` is a list of NumPy
arrays (float32 unless a check says otherwise); a ``disable_native`` argument is a
zero-argument context-manager factory (e.g. ``lambda: use_native(False)``); a
``path_report`` is a zero-argument callable returning the last path as a string.
Every check raises AssertionError with a message saying what broke, and returns what
it computed so a test can add its own assertions.
"""
from __future__ import annotations

import numpy as np

from tinytorch.core.autograd import gradcheck
from tinytorch.core.tensor import Tensor

__all__ = ["check_ndarray_in_ndarray_out", "check_tensor_in_tensor_out", "check_gradcheck",
           "check_native_parity", "check_path_report", "check_contract", "run_with_grads"]


def _as_numpy(x):
    return x.data if isinstance(x, Tensor) else np.asarray(x)


def check_ndarray_in_ndarray_out(fn, inputs, reference=None, atol=1e-5, rtol=1e-5):
    """ndarray in -> ndarray out (never a Tensor); matches ``reference(*inputs)`` if given."""
    out = fn(*[np.array(x) for x in inputs])
    assert isinstance(out, np.ndarray) and not isinstance(out, Tensor), \
        f"ndarray inputs must give an ndarray, got {type(out).__name__}"
    if reference is not None:
        ref = np.asarray(reference(*[np.asarray(x, dtype=np.float64) for x in inputs]))
        assert out.shape == ref.shape, f"ndarray path: shape {out.shape}, reference {ref.shape}"
        np.testing.assert_allclose(out.astype(np.float64), ref, atol=atol, rtol=rtol,
                                   err_msg="ndarray path disagrees with the float64 reference")
    return out


def run_with_grads(fn, inputs, requires_grad=None, upstream_seed=0):
    """Run ``fn`` on Tensors built from ``inputs`` and backpropagate a fixed random
    upstream gradient. Returns (output Tensor, [grad or None per input], upstream)."""
    requires_grad = [True] * len(inputs) if requires_grad is None else list(requires_grad)
    tensors = [Tensor(np.array(x), requires_grad=r) for x, r in zip(inputs, requires_grad)]
    out = fn(*tensors)
    upstream = np.random.default_rng(upstream_seed).standard_normal(out.shape).astype(out.data.dtype)
    if out.requires_grad:
        out.backward(upstream)
    return out, [t.grad for t in tensors], upstream


def check_tensor_in_tensor_out(fn, inputs, reference=None, atol=1e-5, rtol=1e-5, requires_grad=None):
    """Tensor in -> Tensor out, graph kept, backward reaches every input that asks for it."""
    requires_grad = [True] * len(inputs) if requires_grad is None else list(requires_grad)
    out, grads, _ = run_with_grads(fn, inputs, requires_grad)
    assert isinstance(out, Tensor), f"Tensor inputs must give a Tensor, got {type(out).__name__}"
    assert out.requires_grad, "the output of Tensor inputs that require grad must require grad"
    assert out.grad_fn is not None, "the output must keep its graph (grad_fn is None)"
    for i, (x, r, g) in enumerate(zip(inputs, requires_grad, grads)):
        if r:
            assert g is not None, f"input {i} requires grad but backward gave it no gradient"
            assert g.shape == np.shape(x), f"input {i}: gradient shape {g.shape}, input shape {np.shape(x)}"
            assert np.all(np.isfinite(g)), f"input {i}: non-finite gradient"
        else:
            assert g is None, f"input {i} does not require grad but received one"
    if reference is not None:
        ref = np.asarray(reference(*[np.asarray(x, dtype=np.float64) for x in inputs]))
        np.testing.assert_allclose(out.data.astype(np.float64), ref, atol=atol, rtol=rtol,
                                   err_msg="Tensor path disagrees with the float64 reference")
    return out, grads


def check_gradcheck(fn, inputs, **kwargs):
    """``gradcheck`` on float64 copies of the inputs (all of them checked)."""
    tensors = [Tensor(np.asarray(x, dtype=np.float64), requires_grad=True, dtype=np.float64)
               for x in inputs]
    assert gradcheck(fn, *tensors, **kwargs)
    return True


def check_native_parity(fn, inputs, disable_native, atol=1e-5, rtol=1e-4):
    """Values and gradients agree with the native path enabled and disabled."""
    out_fast, grads_fast, _ = run_with_grads(fn, inputs)
    with disable_native():
        out_ref, grads_ref, _ = run_with_grads(fn, inputs)
    np.testing.assert_allclose(out_fast.data, out_ref.data, atol=atol, rtol=rtol,
                               err_msg="forward differs between the native path and the fallback")
    for i, (gf, gr) in enumerate(zip(grads_fast, grads_ref)):
        assert (gf is None) == (gr is None), f"input {i}: gradient present on one path only"
        if gf is not None:
            np.testing.assert_allclose(gf, gr, atol=atol, rtol=rtol,
                                       err_msg=f"gradient of input {i} differs between paths")
    return out_fast, out_ref


def check_path_report(fn, inputs, path_report, disable_native=None, fallback_name="numpy",
                      native_expected=False, native_prefix="native"):
    """The report is a non-empty string after a call; under ``disable_native`` it names the
    fallback; when ``native_expected`` it names the native path otherwise."""
    fn(*[np.array(x) for x in inputs])
    path = path_report()
    assert isinstance(path, str) and path and path != "none", f"path report is empty: {path!r}"
    if native_expected:
        assert path.startswith(native_prefix), f"the native path was expected but {path!r} ran"
    else:
        assert path == fallback_name or path.startswith(native_prefix), \
            f"path report {path!r} names neither the fallback nor a native path"
    if disable_native is not None:
        with disable_native():
            fn(*[np.array(x) for x in inputs])
            fallback = path_report()
        assert fallback == fallback_name, \
            f"with the native path disabled the report says {fallback!r}, expected {fallback_name!r}"
    return path


def check_contract(fn, inputs, *, reference=None, disable_native=None, path_report=None,
                   native_expected=False, fallback_name="numpy", atol=1e-5, rtol=1e-5,
                   gradcheck_inputs=None, gradcheck_kwargs=None):
    """Every check that applies. ``gradcheck_inputs`` (small arrays) defaults to ``inputs``;
    pass ``disable_native``/``path_report`` when the extension has a native path."""
    report = {}
    report["ndarray"] = check_ndarray_in_ndarray_out(fn, inputs, reference, atol, rtol)
    report["tensor"] = check_tensor_in_tensor_out(fn, inputs, reference, atol, rtol)
    check_gradcheck(fn, inputs if gradcheck_inputs is None else gradcheck_inputs,
                    **(gradcheck_kwargs or {}))
    if disable_native is not None:
        report["parity"] = check_native_parity(fn, inputs, disable_native, atol, rtol)
    if path_report is not None:
        report["path"] = check_path_report(fn, inputs, path_report, disable_native,
                                           fallback_name, native_expected)
    return report
