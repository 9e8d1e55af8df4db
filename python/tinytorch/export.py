"""export: our models -> ONNX files (``to_onnx``), checked by ONNX Runtime in the tests.

What this file owns: a module walk that turns a model into one ONNX graph. A walk (not the
autograd tape) because each of our layers maps onto a fixed ONNX pattern and its weights become
initializers by name. This first version covers Sequential stacks of Linear, ReLU, Flatten,
Softmax and LogSoftmax (milestone 04's MLP); any other layer raises ValueError naming it.
Conv2d / max pooling / the GPT / LoRA-merged models are not mapped yet. ``onnx`` is an optional
extra: without it ``import tinytorch`` still works and ``to_onnx`` raises ImportError.
"""
from __future__ import annotations

import numpy as np

from ._atomic import write_file

__all__ = ["to_onnx", "OPSET"]

OPSET = 17


def _onnx():
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("tinytorch.export.to_onnx needs the onnx package: "
                          "pip install 'tinytorch[onnx]' (or pip install onnx onnxruntime)") from e
    return onnx, helper, numpy_helper


def _layers(model):
    from .core.layers import Sequential
    if isinstance(model, Sequential):
        for layer in model.layers:
            yield from _layers(layer)
    else:
        yield model


def to_onnx(model, example_input, path, dynamic_batch: bool = True) -> None:
    """Write ``model`` as an ONNX file at ``path`` (replaced atomically).

    Args:
        model: a Sequential of Linear / ReLU / Flatten / Softmax / LogSoftmax layers (or one such layer).
        example_input: an array or Tensor of the input's shape (float32); its shape fixes the graph's
            input except the batch axis when ``dynamic_batch``.
        path: where the .onnx file goes.
        dynamic_batch: give the input's and output's first axis a symbolic size "batch".
    """
    onnx, helper, numpy_helper = _onnx()
    from .core.activations import LogSoftmax, ReLU, Softmax
    from .core.layers import Flatten, Linear
    x = np.asarray(getattr(example_input, "data", example_input))
    if x.ndim < 1:
        raise ValueError(f"to_onnx: example_input needs at least one dimension, got shape {x.shape}")
    nodes, inits, name, out_dim = [], [], "input", list(x.shape)
    for i, layer in enumerate(_layers(model)):
        out = f"t{i}"
        if isinstance(layer, Linear):
            w = np.asarray(layer.weight.data, dtype=np.float32)
            inits.append(numpy_helper.from_array(w, f"l{i}.weight"))
            ins = [name, f"l{i}.weight"]
            nodes.append(helper.make_node("MatMul", ins, [out + "m" if layer.bias is not None else out]))
            if layer.bias is not None:
                inits.append(numpy_helper.from_array(np.asarray(layer.bias.data, np.float32), f"l{i}.bias"))
                nodes.append(helper.make_node("Add", [out + "m", f"l{i}.bias"], [out]))
            out_dim[-1] = w.shape[1]
        elif isinstance(layer, ReLU):
            nodes.append(helper.make_node("Relu", [name], [out]))
        elif isinstance(layer, Softmax):
            nodes.append(helper.make_node("Softmax", [name], [out], axis=layer.axis))
        elif isinstance(layer, LogSoftmax):
            nodes.append(helper.make_node("LogSoftmax", [name], [out], axis=layer.axis))
        elif isinstance(layer, Flatten) and layer.start_dim == 1 and layer.end_dim == -1:
            nodes.append(helper.make_node("Flatten", [name], [out], axis=1))
            out_dim = [out_dim[0], int(np.prod(out_dim[1:]))]
        else:
            raise ValueError(f"to_onnx: cannot export layer {type(layer).__name__} (op not supported yet)")
        name = out
    nodes.append(helper.make_node("Identity", [name], ["output"]))
    shape_in, shape_out = list(x.shape), out_dim
    if dynamic_batch:
        shape_in[0], shape_out[0] = "batch", "batch"
    graph = helper.make_graph(nodes, "tinytorch", [helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, shape_in)],
                              [helper.make_tensor_value_info("output", onnx.TensorProto.FLOAT, shape_out)], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tinytorch")
    onnx.checker.check_model(proto)
    write_file(path, proto.SerializeToString())
