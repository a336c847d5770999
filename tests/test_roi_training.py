"""End to end: a small two-stage detector head trained through cropgrad's
RoIAlign, in PyTorch and in JAX.

A backbone of strided convolutions makes a three-level pyramid; each box is
pooled from its level (`cropgrad.torch.MultiScaleRoIAlign`; in JAX,
`cropgrad.jax.roi_align` per level, the same levels) and a box head
classifies it.  The boxes are the proposals plus a learnable offset, so the
boxes gradient trains them too.  Each test checks that

- the loss goes down over a few steps of plain gradient descent;
- the gradient the pooler sends to the feature maps is the NumPy API's
  image gradient of that step's pooled-output gradient, bit for bit, level
  by level;
- the boxes move: their gradient is nonzero and the offsets change.

Skipped when a framework is missing, unless CROPGRAD_REQUIRE_ADAPTERS=1.
"""

import numpy as np
from _helpers import adapter, assert_same_bits

import cropgrad

# The problem: two 64 x 64 images, strides 2, 4 and 8 (maps of 32, 16 and
# 8 pixels), boxes of 6 to 48 pixels a side (so every level gets some),
# four classes, 3 x 3 bins with 2 x 2 samples.
BATCH, SIZE, CHANNELS, CLASSES, NUM_BOXES = 2, 64, 6, 4, 24
OUTPUT, SAMPLING = (3, 3), 2
STRIDES = (2, 4, 8)
# Level k (stride 2**k) takes boxes of 4 * 2**k to 8 * 2**k pixels a side
# (the first and last levels also the smaller and larger ones).
CANONICAL_SCALE, CANONICAL_LEVEL = 16, 2
STEPS, LEARNING_RATE = 20, 0.5


def problem():
    """Images, proposals ``[x1, y1, x2, y2]`` with their image, labels."""
    rng = np.random.default_rng(2024)
    images = rng.standard_normal((BATCH, 3, SIZE, SIZE)).astype(np.float32)
    side = np.exp(rng.uniform(np.log(6), np.log(48), NUM_BOXES))
    corner = rng.uniform(0, SIZE - side[:, None], (NUM_BOXES, 2))
    boxes = np.concatenate([corner, corner + side[:, None]], 1).astype(np.float32)
    box_ind = np.sort(rng.integers(0, BATCH, NUM_BOXES)).astype(np.int32)
    labels = rng.integers(0, CLASSES, NUM_BOXES)
    return images, boxes, box_ind, labels


def levels_of(boxes):
    """Each box's level (0 for stride 2), as the pyramid pooler picks it."""
    side = np.sqrt((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))
    level = np.floor(CANONICAL_LEVEL + np.log2(side / CANONICAL_SCALE) + 1e-6)
    return np.clip(level, 1, len(STRIDES)).astype(int) - 1


def test_the_boxes_reach_every_level():
    _, boxes, _, _ = problem()
    assert set(levels_of(boxes)) == {0, 1, 2}


# --------------------------------------------------------------------------
# PyTorch


def test_torch_detector_head_trains_through_the_pooler():
    torch, cgt = adapter("torch", "cropgrad.torch")
    torch.manual_seed(0)
    images, boxes0, box_ind, labels = problem()
    images = torch.from_numpy(images)
    labels = torch.from_numpy(labels)
    convs = torch.nn.ModuleList(
        torch.nn.Conv2d(c, CHANNELS, 3, stride=2, padding=1)
        for c in (3, CHANNELS, CHANNELS)
    )
    head = torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(CHANNELS * OUTPUT[0] * OUTPUT[1], 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, CLASSES),
    )
    offsets = torch.zeros(NUM_BOXES, 4, requires_grad=True)
    names = ["s2", "s4", "s8"]
    pool = cgt.MultiScaleRoIAlign(
        names,
        OUTPUT,
        SAMPLING,
        canonical_scale=CANONICAL_SCALE,
        canonical_level=CANONICAL_LEVEL,
    )
    params = [*convs.parameters(), *head.parameters(), offsets]
    shapes = [(SIZE, SIZE)] * BATCH

    def step():
        features, x = {}, images
        for name, conv in zip(names, convs):
            x = torch.relu(conv(x))
            features[name] = x
        # The pooler's inputs as leaves, so that its own gradients show.
        leaves = {n: f.detach().requires_grad_() for n, f in features.items()}
        boxes = torch.from_numpy(boxes0) + offsets
        per_image = [boxes[torch.from_numpy(box_ind == n)] for n in range(BATCH)]
        pooled = pool(leaves, per_image, shapes)
        pooled.retain_grad()
        loss = torch.nn.functional.cross_entropy(head(pooled), labels)
        loss.backward()
        # Then the backbone, from the gradients the pooler gave its maps.
        torch.autograd.backward(
            list(features.values()), [leaves[n].grad for n in names]
        )
        return loss.item(), leaves, pooled.grad, boxes.detach().numpy()

    losses = []
    for n in range(STEPS):
        for p in params:
            p.grad = None
        loss, leaves, pooled_grad, boxes = step()
        losses.append(loss)
        if n == 0:
            first = (leaves, pooled_grad, boxes)
            assert torch.count_nonzero(offsets.grad) > 0
        with torch.no_grad():
            for p in params:
                p -= LEARNING_RATE * p.grad
    assert pool.scales == [1 / s for s in STRIDES]
    moved = float(offsets.detach().abs().max())
    print(f"torch: loss {losses[0]:.4f} -> {losses[-1]:.4f}, boxes moved {moved:.3g}")
    assert losses[-1] < 0.8 * losses[0], losses
    assert moved > 1e-3

    # The feature maps' gradients of the first step: the NumPy API's image
    # gradient of each level's boxes, bit for bit.
    leaves, pooled_grad, boxes = first
    level = levels_of(boxes)
    for k, name in enumerate(names):
        at = level == k
        expected = cropgrad.roi_align_grad_image(
            pooled_grad.numpy()[at],
            boxes[at],
            box_ind[at],
            tuple(leaves[name].shape),
            spatial_scale=1 / STRIDES[k],
            sampling_ratio=SAMPLING,
        )
        assert_same_bits(leaves[name].grad.numpy(), expected, name)
        assert np.abs(expected).max() > 0


# --------------------------------------------------------------------------
# JAX


def test_jax_detector_head_trains_through_the_pooler():
    jax, jnp, cgj = adapter("jax", "jax.numpy", "cropgrad.jax")
    images, boxes0, box_ind, labels = problem()
    # The level of each proposal, fixed for the run (static shapes).
    groups = [np.flatnonzero(levels_of(boxes0) == k) for k in range(len(STRIDES))]
    order = np.concatenate(groups)
    rng = np.random.default_rng(5)
    params = {
        "convs": [
            rng.standard_normal((CHANNELS, c, 3, 3)).astype(np.float32) * 0.3
            for c in (3, CHANNELS, CHANNELS)
        ],
        "hidden": rng.standard_normal((CHANNELS * 9, 32)).astype(np.float32) * 0.1,
        "out": rng.standard_normal((32, CLASSES)).astype(np.float32) * 0.1,
        "offsets": np.zeros((NUM_BOXES, 4), np.float32),
    }

    def backbone(params):
        maps, x = [], images
        for w in params["convs"]:
            x = jax.lax.conv_general_dilated(x, w, (2, 2), ((1, 1), (1, 1)))
            maps.append(jax.nn.relu(x))
        return maps

    def pool(maps, boxes):
        pooled = [
            cgj.roi_align(
                maps[k],
                boxes[g],
                box_ind[g],
                OUTPUT,
                spatial_scale=1 / STRIDES[k],
                sampling_ratio=SAMPLING,
            )
            for k, g in enumerate(groups)
        ]
        return jnp.concatenate(pooled)  # boxes in `order`

    def head(params, pooled):
        hidden = jax.nn.relu(pooled.reshape(NUM_BOXES, -1) @ params["hidden"])
        logits = hidden @ params["out"]
        picked = jnp.take_along_axis(
            jax.nn.log_softmax(logits), labels[order][:, None], 1
        )
        return -picked.mean()

    def loss(params):
        boxes = boxes0 + params["offsets"]
        return head(params, pool(backbone(params), boxes))

    step = jax.jit(
        lambda p: jax.tree.map(lambda w, g: w - LEARNING_RATE * g, p, jax.grad(loss)(p))
    )
    losses = [float(loss(params))]
    offsets_grad = jax.grad(loss)(params)["offsets"]
    assert np.count_nonzero(np.asarray(offsets_grad)) > 0
    trained = params
    for _ in range(STEPS):
        trained = step(trained)
        losses.append(float(loss(trained)))
    moved = float(np.abs(np.asarray(trained["offsets"])).max())
    print(f"jax: loss {losses[0]:.4f} -> {losses[-1]:.4f}, boxes moved {moved:.3g}")
    assert losses[-1] < 0.8 * losses[0], losses
    assert moved > 1e-3

    # The pooler's gradient to the feature maps at the start: the NumPy
    # API's image gradient (XLA's arithmetic flushes subnormals) of each
    # level's boxes, bit for bit.
    maps = backbone(params)
    pooled, pool_vjp = jax.vjp(lambda m: pool(m, jnp.asarray(boxes0)), maps)
    pooled_grad = jax.grad(lambda x: head(params, x))(pooled)
    got = pool_vjp(pooled_grad)[0]
    start = 0
    for k, g in enumerate(groups):
        part = np.asarray(pooled_grad)[start : start + len(g)]
        start += len(g)
        expected = cropgrad.roi_align_grad_image(
            part,
            boxes0[g],
            box_ind[g],
            maps[k].shape,
            spatial_scale=1 / STRIDES[k],
            sampling_ratio=SAMPLING,
            flush_denormals=True,
        )
        assert_same_bits(np.asarray(got[k]), expected, f"level {k}")
        assert np.abs(expected).max() > 0
