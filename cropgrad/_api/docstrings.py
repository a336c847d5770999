"""Docstring paragraphs that several of cropgrad's public functions share
(the NumPy API's, and the adapters'), written once, as NumPy writes its
ufuncs' common parameters once.

A line of a docstring that holds only ``{name}`` stands for paragraph
`name` of `PARAGRAPHS`, at that line's indentation; `shared` fills them in
when the function is defined, so that ``help()``, the documentation and the
doctests read the whole text.

Examples
--------
>>> @shared
... def f(image_size):
...     '''Parameters
...     ----------
...     {image_size}
...     '''
>>> print(f.__doc__.splitlines()[2])
    image_size : sequence of 4 ints
"""

import textwrap

__all__ = ["PARAGRAPHS", "shared"]

# The threads and TensorFlow's flush-to-zero, the end of the options of
# cropgrad.torch and of the crop_and_resize family.
_TENSORFLOW_THREADS = """\
num_threads : int, optional
    Threads to use, 1 to 1024 (default: OpenMP's default).  The result
    does not depend on it.
flush_denormals : bool, default False
    TensorFlow's flush-to-zero arithmetic (see
    `cropgrad.crop_and_resize_grad_image`)."""

PARAGRAPHS = {
    # The result's dtype, for an op whose input is an image.
    "dtype": """\
dtype : {float32, float64, float16, bfloat16}, optional
    Output dtype.  Default: the image's for float images, float32
    otherwise.  The result is computed in the arithmetic type and
    rounded once (float16 and bfloat16 from float32 arithmetic only).""",
    # The result's dtype, for an image gradient.
    "grads_dtype": """\
dtype : {float32, float64, float16, bfloat16}, optional
    Output dtype.  Default: the dtype of `grads` for float gradients,
    float32 otherwise.  Accumulated in the arithmetic type and rounded
    once.""",
    # An image gradient's shape.
    "image_size": """\
image_size : sequence of 4 ints
    The image's shape in `data_format`'s order: the output's shape.""",
    # The options of an op whose default layout is NCHW.
    "options": """\
out : ndarray, optional
    C-contiguous array of the result's shape and dtype to overwrite.
data_format : {"NCHW", "NHWC"}, default "NCHW"
    Layout of `image` and of the result (the same bits, transposed).
num_threads : int, optional
    Threads to use, 1 to 1024.  Default: OpenMP's default.  The result
    does not depend on it.
flush_denormals : bool, default False
    Compute with flush-to-zero and denormals-are-zero.""",
    # cropgrad.torch's options.
    "torch_options": """\
data_format : {"NCHW", "NHWC"}, default "NCHW"
    Layout of `image` and of the result.
"""
    + _TENSORFLOW_THREADS,
    # The options of the crop_and_resize family's ops whose result is crops
    # (the forward op and its boxes JVP).
    "crops_options": """\
out : ndarray, optional
    C-contiguous float32 array of the result's shape to overwrite and
    return instead of a new array.
data_format : {"NHWC", "NCHW"}, default "NHWC"
    Layout of `image` and of the result: with ``"NCHW"``, image
    ``(batch, depth, image_height, image_width)`` and result
    ``(num_boxes, depth, crop_height, crop_width)``, the NHWC result
    transposed, bit for bit.
"""
    + _TENSORFLOW_THREADS,
    # cropgrad.jax's options.
    "jax_options": """\
data_format : {"NCHW", "NHWC"}
    Layout of `image` and of the result.  Default: NHWC for
    crop-and-resize (TensorFlow's), NCHW for the other families.
num_threads : int, optional
    Threads of the kernel, 1 to 1024; static.  Default:
    `DEFAULT_THREADS`.  The result does not depend on it.""",
}


def shared(function):
    """`function`, each ``{name}`` line of its docstring replaced by
    paragraph `name`, indented as that line (nothing to do under ``-OO``,
    which drops docstrings)."""
    if function.__doc__ is None:
        return function
    lines = []
    for line in function.__doc__.split("\n"):
        name = line.strip()
        if name.startswith("{") and name.endswith("}"):
            indent = line[: len(line) - len(line.lstrip())]
            line = textwrap.indent(PARAGRAPHS[name[1:-1]], indent)
        lines.append(line)
    function.__doc__ = "\n".join(lines)
    return function
