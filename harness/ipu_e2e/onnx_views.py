"""Views: how an ONNX value's N-D array sits in the elements of one 2-D tensor
of the workload graph, so that the importer (onnx_import.py) follows Reshape,
Transpose, Slice, Squeeze, Unsqueeze and Gather without moving data.

A view is an offset and, per logical axis, a tuple of atoms (size, stride),
most significant first: logical element i of an axis is the mixed-radix
number its atoms spell, and the element's place in the tensor's row-major
elements is offset + the sum of atom index x stride over every atom.  A
reshape regroups the atoms (splitting one where a new axis ends inside it),
so it never copies, whatever the strides; a transpose permutes axes; a
slice of step 1 or a single index moves the offset within the most
significant atom of its axis.  A view is "over rows" of a tensor with
`cols` columns when its last axis is exactly the columns (one (cols, 1)
atom once merged) and the others step by whole rows: then a row-wise op of
the graph (a matmul, a LayerNorm) can run on the whole tensor and the view
of its result is the same selection of rows.
"""
from math import prod

import numpy as np


class ViewError(ValueError):
    """A layout change a view cannot follow (an atom that does not split)."""


def merged(atoms):
    """The atoms with neighbours that form one run merged, size-1 atoms dropped."""
    out = []
    for size, stride in atoms:
        if size == 1:
            continue
        if out and out[-1][1] == size * stride:
            out[-1] = (out[-1][0] * size, stride)
        else:
            out.append((size, stride))
    return tuple(out)


class View:
    def __init__(self, tensor, axes, offset=0):
        self.tensor, self.axes, self.offset = tensor, tuple(tuple(a) for a in axes), offset

    @classmethod
    def whole(cls, tensor, shape):
        """The row-major view of a tensor as an array of `shape`."""
        strides, step = [], 1
        for size in reversed(shape):
            strides.append(step)
            step *= size
        return cls(tensor, [((size, stride),) for size, stride in zip(shape, reversed(strides))])

    @property
    def shape(self):
        return tuple(prod(size for size, _ in axis) for axis in self.axes)

    def __repr__(self):
        return f"View({self.tensor}, {self.axes}, offset={self.offset})"

    def transpose(self, perm):
        return View(self.tensor, [self.axes[p] for p in perm], self.offset)

    def reshape(self, shape):
        atoms = list(merged([atom for axis in self.axes for atom in axis]))
        if prod(shape) != prod(self.shape):
            raise ViewError(f"cannot reshape {self.shape} to {tuple(shape)}")
        axes = []
        for size in shape:
            axis, left = [], size
            while left > 1:
                if not atoms:
                    raise ViewError(f"cannot reshape {self.shape} to {tuple(shape)}")
                atom_size, stride = atoms.pop(0)
                if atom_size <= left:
                    if left % atom_size:
                        raise ViewError(f"reshape {self.shape} to {tuple(shape)} splits a dimension unevenly")
                    axis.append((atom_size, stride))
                    left //= atom_size
                else:
                    if atom_size % left:
                        raise ViewError(f"reshape {self.shape} to {tuple(shape)} splits a dimension unevenly")
                    axis.append((left, stride * (atom_size // left)))
                    atoms.insert(0, (atom_size // left, stride))
                    left = 1
            axes.append(tuple(axis) or ((1, 0),))
        return View(self.tensor, axes, self.offset)

    def slice(self, axis, start, stop):
        """Elements start..stop-1 of an axis (step 1)."""
        atoms = merged(self.axes[axis]) or ((1, 0),)
        inner = prod(size for size, _ in atoms[1:])
        if start % inner or stop % inner or stop <= start:
            raise ViewError(f"a slice [{start}, {stop}) of an axis laid out as {atoms}")
        axes = list(self.axes)
        axes[axis] = ((((stop - start) // inner), atoms[0][1]),) + atoms[1:]
        return View(self.tensor, axes, self.offset + (start // inner) * atoms[0][1])

    def index(self, axis, i):
        """Element i of an axis, the axis removed (Gather of one index)."""
        taken = self.slice(axis, i, i + 1)
        return View(self.tensor, taken.axes[:axis] + taken.axes[axis + 1:], taken.offset)

    def unsqueeze(self, axis):
        return View(self.tensor, self.axes[:axis] + (((1, 0),),) + self.axes[axis:], self.offset)

    def squeeze(self, axis):
        if self.shape[axis] != 1:
            raise ViewError(f"axis {axis} of {self.shape} is not 1 long")
        return View(self.tensor, self.axes[:axis] + self.axes[axis + 1:], self.offset)

    def over_rows(self, cols):
        """The rows this view selects, as (atoms over row indices, first row),
        when its last axis is exactly a whole row of `cols` columns; else None."""
        if not self.axes or merged(self.axes[-1]) != ((cols, 1),) or self.offset % cols:
            return None
        rows = []
        for axis in self.axes[:-1]:
            for size, stride in axis:
                if size != 1 and stride % cols:
                    return None
                rows.append((size, stride // cols if size != 1 else 0))
        return tuple(rows), self.offset // cols

    def element_indices(self):
        """Every element's place in the tensor, as an int64 array of the view's shape."""
        places = np.full((), self.offset, dtype=np.int64)
        for axis in self.axes:
            for size, stride in axis:
                places = places[..., None] + np.arange(size, dtype=np.int64) * stride
        return places.reshape(self.shape)
