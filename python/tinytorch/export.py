"""export: our models -> ONNX files (``to_onnx``), checked by ONNX Runtime in the tests.

What this file owns: turning a model into one ONNX graph and writing it. The mechanism is a
walk over known layer types (_export_layers.py: one small emitter per type), not a trace of the
autograd tape: each of our layers has a fixed forward, so it maps onto a fixed ONNX pattern, its
Parameters become initializers under their ``named_parameters()`` names, and an unknown layer is
refused by name (``UnsupportedLayerError``, a NotImplementedError and a ValueError) instead of
being silently traced into whatever ops one example happened to take. Covered: Sequential
stacks of Linear / Conv2d / MaxPool2d / AvgPool2d / Flatten / activations / Softmax /
LogSoftmax (milestone 04's MLP and CNN), LayerNorm, Embedding, and the GPT of
core/transformers.py (tied head or not; a LoRA-merged GPT is a plain GPT again after
``merge_and_unload``).

Inputs: float models take float32 "input"; a GPT (or an Embedding) takes int64 token ids.
``dynamic_batch`` makes axis 0 symbolic ("batch"), and for a GPT ``dynamic_sequence`` axis 1
("sequence": the position table is sliced and the causal mask built at run time).

Writing: one .onnx file through tinytorch._atomic. When the weights exceed
``external_data_threshold_bytes`` (default just under protobuf's 2 GiB limit) they go to one
external data file beside it, ``<name>.<token>.data`` (a fresh token per export, written and
fsync'ed before the model file that names it replaces the old one, so a kill leaves the old
model with its old data or the new model with its new data; the previous export's data file is
removed after). ``onnx`` is an optional extra: ``import tinytorch`` never imports it, and
``to_onnx`` without it raises ImportError saying what to install.

Assumes: the onnx package (optional: a missing one is an ImportError naming the extra) and
the emitters of _export_layers.py; files are written atomically (tinytorch._atomic).
"""
from __future__ import annotations

import contextlib
import os
import secrets

import numpy as np

from ._atomic import fsync_folder, replacing, write_file
from ._export_layers import UnsupportedLayerError

__all__ = ["to_onnx", "OPSET", "IR_VERSION", "EXTERNAL_DATA_THRESHOLD_BYTES", "UnsupportedLayerError"]

OPSET = 21                       # Gelu needs 20; 21 is what onnxruntime >= 1.18 (our floor) runs
IR_VERSION = 10                  # the IR of opset 21, so older runtimes load the file
EXTERNAL_DATA_THRESHOLD_BYTES = 2**31 - 2**26   # protobuf refuses messages of 2 GiB; keep 64 MiB slack
_ALIGN = 64                      # byte alignment of each tensor in the external data file


def _onnx():
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("tinytorch.export.to_onnx needs the onnx package: "
                          "pip install 'tinytorch[onnx]' (or pip install onnx onnxruntime)") from e
    return onnx, helper, numpy_helper


def to_onnx(model, example_input, path, dynamic_batch: bool = True, dynamic_sequence: bool = True,
            external_data_threshold_bytes: int = EXTERNAL_DATA_THRESHOLD_BYTES) -> str:
    """Write ``model`` as an ONNX file at ``path`` (replaced atomically); returns the path.

    Args:
        model: a layer with an ONNX mapping (see the package docstring): a Sequential MLP or CNN,
            a GPT (merge LoRA adapters first), or one such layer.
        example_input: an array or Tensor of the input's shape: float (float32 in the file) for
            MLP / CNN inputs, integer token ids [batch, seq] for a GPT. The model runs on it once
            to fix the output's shape.
        path: where the .onnx file goes.
        dynamic_batch: give the input's and output's first axis the symbolic size "batch".
        dynamic_sequence: for a GPT, give axis 1 the symbolic size "sequence" (up to max_seq_len).
        external_data_threshold_bytes: above this many bytes of weights, they go to an external
            data file beside ``path`` (ONNX Runtime finds it there); 0 always does.
    """
    onnx, helper, numpy_helper = _onnx()
    from .core.autograd import no_grad
    from .core.embeddings import Embedding
    from .core.tensor import Tensor
    from .core.transformers import GPT
    from ._export_layers import Graph, emit
    if not isinstance(external_data_threshold_bytes, (int, np.integer)) or external_data_threshold_bytes < 0:
        raise ValueError(f"to_onnx: external_data_threshold_bytes must be a non-negative int, "
                         f"got {external_data_threshold_bytes!r}")
    x = np.asarray(getattr(example_input, "data", example_input))
    if x.ndim < 1:
        raise ValueError(f"to_onnx: example_input needs at least one dimension, got shape {x.shape}")
    if x.dtype.kind in "iu":
        x, elem = x.astype(np.int64), onnx.TensorProto.INT64
    elif x.dtype.kind == "f":
        x, elem = x.astype(np.float32), onnx.TensorProto.FLOAT
    else:
        raise TypeError(f"to_onnx: example_input must hold floats or integer ids, got dtype {x.dtype}")
    if isinstance(model, (GPT, Embedding)) and elem != onnx.TensorProto.INT64:
        raise TypeError(f"to_onnx: a {type(model).__name__} takes integer token ids, got dtype {x.dtype}")

    g = Graph(onnx, helper, numpy_helper, {id(p): n for n, p in model.named_parameters()})
    out = emit(g, model, "input", "")
    g.nodes.append(helper.make_node("Identity", [out], ["output"]))
    with no_grad():
        y = model(Tensor(x) if elem == onnx.TensorProto.FLOAT else x)
    dims_in, dims_out = list(x.shape), list(np.shape(getattr(y, "data", y)))
    symbolic = {0: "batch"} if dynamic_batch else {}
    if dynamic_sequence and isinstance(model, GPT):
        symbolic[1] = "sequence"
    for axis, name in symbolic.items():
        dims_in[axis], dims_out[axis] = name, name

    path = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(path))
    previous, token = _external_files(onnx, path), secrets.token_hex(4)
    location = f"{name}.{token}.data" if sum(a.nbytes for a in g.arrays.values()) > external_data_threshold_bytes else None
    with (replacing(os.path.join(folder, location)) if location else contextlib.nullcontext()) as blob:
        inits = [_initializer(onnx, numpy_helper, n, a, blob, location) for n, a in g.arrays.items()]
    graph = helper.make_graph(g.nodes, "tinytorch", [helper.make_tensor_value_info("input", elem, dims_in)],
                              [helper.make_tensor_value_info("output", onnx.TensorProto.FLOAT, dims_out)], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tinytorch")
    proto.ir_version = IR_VERSION
    if location is None:
        onnx.checker.check_model(proto)
        write_file(path, proto.SerializeToString())
    else:  # the checker reads external data relative to the model file: check a staged copy beside it
        staged = os.path.join(folder, f".{name}.{token}.onnx.tmp")
        try:
            write_file(staged, proto.SerializeToString())
            onnx.checker.check_model(staged)
            os.replace(staged, path)
            fsync_folder(folder)
        except BaseException:
            for leftover in (staged, os.path.join(folder, location)):
                with contextlib.suppress(OSError):
                    os.unlink(leftover)
            raise
    for old in previous - {location}:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(folder, old))
    return path


def _initializer(onnx, numpy_helper, name, arr, blob, location):
    """A TensorProto holding ``arr``; with ``blob`` (the open external data file) tensors of
    1 kB or more are appended there at a 64-byte-aligned offset and the proto only points."""
    if blob is None or arr.nbytes < 1024:
        return numpy_helper.from_array(arr, name)
    pad = -blob.tell() % _ALIGN
    blob.write(b"\0" * pad)
    offset = blob.tell()
    blob.write(np.ascontiguousarray(arr).tobytes())
    t = onnx.TensorProto(name=name, dims=list(arr.shape),
                         data_type=onnx.helper.np_dtype_to_tensor_dtype(arr.dtype))
    t.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(arr.nbytes))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return t


def _external_files(onnx, path) -> set:
    """The external data files an existing ONNX file at ``path`` names that this exporter wrote
    (``<name>.<token>.data``); empty when there is no such file or it does not parse."""
    try:
        old = onnx.load(os.fspath(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - a missing or foreign file just has nothing to clean up
        return set()
    prefix = os.path.basename(os.fspath(path)) + "."
    return {e.value for t in old.graph.initializer for e in t.external_data
            if e.key == "location" and e.value.startswith(prefix) and e.value.endswith(".data")
            and os.sep not in e.value}
