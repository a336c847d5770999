"""The NumPy API's layer (private; its public names are re-exported by
``cropgrad``).

- one module per family (`crop_and_resize`, `roi_align`, `grid_sample`):
  its functions and their docstrings: convert the arguments, run the
  gate, allocate the output, one call through the bridge (cropgrad._core);
- `validation`: the Python-only concerns, one helper per kind of argument,
  shared with cropgrad.raw_ops, cropgrad.jax and cropgrad.torch: types,
  dtypes, strings, array conversion, numbers of dimensions, shapes that
  relate two arrays (no check of a shape's values: that is the gate's);
- `docstrings`: the parameter paragraphs several functions' docstrings
  share, written once;
- `config`: `show_config`.

It imports cropgrad._core, cropgrad.capi (the C-level API's codes) and the
runtime; nothing here imports an adapter.
"""
