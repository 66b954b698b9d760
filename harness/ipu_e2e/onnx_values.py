"""What the ONNX importer (onnx_import.py) keeps per ONNX value while it walks a
model, and the errors it reports: a view of a graph tensor (Tensor), a
pointwise function of one under way (Pointwise), a LayerNorm's or an
attention's pattern part way (Mean, Normalized, Scores), a Loop body's
iteration number and per-iteration parameters (Iteration, Members), a tensor
plus a constant not yet added (Shifted); `at` names a node as every message
does.
"""
import math

import numpy as np

# What the importer takes, as the unsupported-op message lists it.
SUPPORTED = ("MatMul and Gemm with constant weights (and their bias Add); Conv with its stride as its kernel on "
             "a model input (a patch embedding) and constant rows concatenated before its tokens (a class "
             "token); self-attention of one fused q|k|v projection and attention pooling of one query (their "
             "Reshape/Transpose/Slice/Split, a 1/sqrt(d) scale, MatMul, Softmax, MatMul); a Loop over stacked "
             "per-iteration weights (the workload's Repeat); Add of two tensors or of a tensor and a constant; "
             "Mul by a constant (a scalar or one per column) folded into the weights of the matmul before it; "
             "LayerNormalization and its ReduceMean/Sub/Pow/Sqrt/Div form; GELU in its tanh and erf forms; "
             "Identity, Dropout (inference); Reshape, Transpose, Slice, Split, Gather, Squeeze, Unsqueeze, "
             "Flatten, Concat and shape computations on constants, static shapes and the model's inputs")


def at(node):
    """A node as messages name it: node '<name or first output>' (<op type>)."""
    return f"node '{node.name or (node.output[0] if node.output else '?')}' ({node.op_type})"


class Unsupported(ValueError):
    """A node the importer cannot express in the workload graph."""

    def __init__(self, node, why):
        super().__init__(f"{at(node)}: {why}. Supported: {SUPPORTED}")


class ModelError(ValueError):
    """A model that is not valid ONNX for the importer (opset, types, shapes)."""


class Tensor:
    """A computed value: a view of a tensor of the workload graph."""

    def __init__(self, view):
        self.view = view


class Pointwise:
    """f(x) for a computed x: f is a Python function of a numpy array, steps
    the operations that made it (for messages); name the ONNX value it is."""

    def __init__(self, x, f, steps):
        self.x, self.f, self.steps, self.name = x, f, steps, None


class Mean:
    """mean(x) over the last axis, kept dims: the start of a LayerNorm."""

    def __init__(self, x):
        self.x = x


class Normalized:
    """A LayerNorm of x under way, `stage` the step its pattern reached:
    centered (x - mean), squared, variance, variance+eps, std, normalized,
    scaled (times gamma)."""

    def __init__(self, x, stage, epsilon=None, gamma=None):
        self.x, self.stage, self.epsilon, self.gamma = x, stage, epsilon, gamma


class Members(np.ndarray):
    """Member i of a parameter sequence inside a Loop body (a Gather by the iteration number from the
    sequence stacked as one initializer): an array of member 0's values whose `stacked` holds all."""

    def __array_finalize__(self, obj):
        self.stacked = getattr(obj, "stacked", None)


class Iteration:
    """A Loop body's iteration number."""


class Shifted:
    """A tensor plus a constant not yet added (a class token's row, until the position embedding's Add
    joins it): written as one add of a parameter when something reads it."""

    def __init__(self, x, constant):
        self.x, self.constant = x, constant


class Scores:
    """q k^T of an attention under way: q and k views of one [rows x 3C] tensor (k transposed), q
    possibly scaled (a pointwise function); `softmax` once a Softmax over keys has run."""

    def __init__(self, q, k, softmax=False):
        self.q, self.k, self.softmax = q, k, softmax


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
