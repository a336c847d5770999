"""The machinery of `cropgrad.torch`, split by concern.

`cropgrad.torch` is the public face (the functions and their docstrings);
everything else is here.  A call of a public function goes::

    cropgrad.torch.crop_and_resize (torch.py)
      registration.call       the public arguments checked (checks.public)
        autograd.CropAndResize.apply   (torch.compile: torch.ops.cropgrad.*)
          torch.ops.cropgrad.crop_and_resize      the dispatcher
            kernels._crop_forward         CPU: the metadata plan (the gate,
                                          once), then cropgrad._core's bridge
                                          on NumPy views (data checks, kernel)

Modules, each importing only those above it (and PyTorch, cropgrad._core,
cropgrad._api):

- `checks`: argument checks of the public functions, binding of the
  dispatcher's arguments by name (`cropgrad._ops`), and the
  metadata plans (the gate on concrete shapes, shape inference on
  symbolic ones), with the NumPy API's messages in the caller's layout.
- `grid_plans`: grid sampling's metadata plans, on `checks`' helpers.
- `tensors`: memory layouts (``channels_last``: a tensor read where it
  is), NumPy views, allocation (huge pages for large results).
- `kernels`: one function an op, the CPU kernel and the fake
  implementation: plan, allocation, NumPy views, the bridge; named by
  family and kind, found from the model (`kernels.kernel`).
- `vmap`: the vmap rule, which folds the mapped axis into one call.
- `autograd`: one ``torch.autograd.Function`` an op, all made by one
  class from the op model's adjoint rows: backward, jvp, and a generated
  vmap rule.
- `registration`: the ``torch.library`` definitions (schema, CPU kernel,
  fake, Autograd, AutocastCPU, vmap), made when it is imported, and the
  entry the public functions call.  Its table `registration.OPS` lists
  each op's kernel and Function.

RoIAlign's ops are four more rows of `registration.OPS`, with their own
plans (`checks.roi_*_plan`), kernels (`kernels._roi_*`), hooks in their
Functions' rules (`autograd._HOOKS`) and folding under vmap
(`vmap._roi_folded`): they take torchvision's boxes ``Tensor[K, 5]``, whose
first column holds the image indices.

Grid sampling's ops take ``torch.nn.functional.grid_sample``'s arguments;
their kernels (`kernels._grid_*`) call the NumPy API's functions on
views of the tensors after their plans (`grid_plans`, the NumPy
API's shape checks on the shapes alone), and vmap folds every tensor along
its batch axis (`vmap._grid_folded`).

A new op of the family is a kernel function and a plan; its schema,
argument names and Function come from `cropgrad._ops`.
"""
