"""End to end: a spatial transformer trained through cropgrad's grid sampling.

A small localisation network reads each image and predicts an affine
transform (starting from the identity); the transform's sampling grid
(PyTorch's ``affine_grid``, or its few lines of jnp) resamples the
image's feature map through `cropgrad.torch.grid_sample` (or
`cropgrad.jax.grid_sample`, under `jax.jit` and `jax.grad`), and a
classifier reads the result.  The
task needs the transform: the label is the quadrant holding a bright
square near a corner, and the classifier sees only the centre of the
resampled map, which the identity transform barely reaches.  The test
checks that

- the loss falls tenfold over 40 steps of plain gradient descent, and the
  transform moves away from the identity (the grid gradient trains it);
- the gradients the sampler sends to the feature map and to the grid are
  the NumPy API's image and grid gradients of that step's output
  gradient, bit for bit (with ``flush_denormals=True`` for JAX,
  XLA:CPU's arithmetic).

Each test is skipped when its framework is missing, unless
CROPGRAD_REQUIRE_ADAPTERS=1.
"""

import numpy as np
import pytest
from _helpers import adapter, assert_same_bits

import cropgrad

# Eight 24 x 24 images with a bright 6 x 6 square in one quadrant; 4
# feature channels; the classifier reads the resampled map's central 8 x 8.
BATCH, SIZE, CHANNELS, CLASSES, CENTRE = 8, 24, 4, 4, 8
# A rate at which the transform moves smoothly (by about 0.3 from the
# identity): at twice this rate the steps overshoot, and where the loss
# ends depended on which of its CPU kernels PyTorch ran.
STEPS, LEARNING_RATE = 40, 0.1
MODES = ("bilinear", "bicubic")


def problem():
    """Images ``[N, 1, SIZE, SIZE]`` and their labels (the square's
    quadrant)."""
    rng = np.random.default_rng(7)
    images = 0.1 * rng.standard_normal((BATCH, 1, SIZE, SIZE)).astype(np.float32)
    labels = np.arange(BATCH) % CLASSES
    half = SIZE // 2
    for n, label in enumerate(labels):
        top = (label // 2) * half + rng.integers(2, half - 8)
        left = (label % 2) * half + rng.integers(2, half - 8)
        images[n, 0, top : top + 6, left : left + 6] += 1.0
    return images, labels


@pytest.mark.parametrize("mode", MODES)
def test_torch_spatial_transformer_trains_through_the_sampler(mode):
    torch, cgt = adapter("torch", "cropgrad.torch")
    torch.manual_seed(0)
    images, labels = problem()
    images, labels = torch.from_numpy(images), torch.from_numpy(labels)
    features = torch.nn.Conv2d(1, CHANNELS, 3, padding=1)
    locate = torch.nn.Sequential(
        torch.nn.AvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(36, 6)
    )
    # The identity transform to start with.
    torch.nn.init.zeros_(locate[2].weight)
    with torch.no_grad():
        locate[2].bias.copy_(torch.tensor([1.0, 0, 0, 0, 1, 0]))
    classify = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(CHANNELS * CENTRE * CENTRE, CLASSES)
    )
    params = [*features.parameters(), *locate.parameters(), *classify.parameters()]
    lo, hi = (SIZE - CENTRE) // 2, (SIZE + CENTRE) // 2

    def step():
        theta = locate(images).view(BATCH, 2, 3)
        grid = torch.nn.functional.affine_grid(
            theta, (BATCH, CHANNELS, SIZE, SIZE), align_corners=False
        )
        maps = torch.relu(features(images))
        # The sampler's inputs as leaves, so that its own gradients show.
        maps_leaf = maps.detach().requires_grad_()
        grid_leaf = grid.detach().requires_grad_()
        out = cgt.grid_sample(maps_leaf, grid_leaf, mode, "zeros", False)
        out.retain_grad()
        logits = classify(out[:, :, lo:hi, lo:hi])
        loss = torch.nn.functional.cross_entropy(logits, labels)
        loss.backward()
        # Then the networks before the sampler, from its gradients.
        torch.autograd.backward([maps, grid], [maps_leaf.grad, grid_leaf.grad])
        return loss.item(), maps_leaf, grid_leaf, out.grad, theta.detach()

    losses = []
    for n in range(STEPS):
        for p in params:
            p.grad = None
        loss, maps, grid, out_grad, theta = step()
        losses.append(loss)
        if n in (0, STEPS - 1):
            options = dict(mode=mode, padding_mode="zeros", align_corners=False)
            g, m, x = (t.detach().numpy() for t in (out_grad, maps, grid))
            assert_same_bits(
                maps.grad.numpy(),
                cropgrad.grid_sample_grad_image(g, x, m.shape, **options),
            )
            assert_same_bits(
                grid.grad.numpy(), cropgrad.grid_sample_grad_grid(g, m, x, **options)
            )
        with torch.no_grad():
            for p in params:
                p -= LEARNING_RATE * p.grad
    identity = torch.tensor([[1.0, 0, 0], [0, 1, 0]])
    moved = float((theta - identity).abs().max())
    print(f"{mode}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, theta moved {moved:.3g}")
    assert losses[-1] < 0.1 * losses[0], losses
    assert moved > 1e-2


def affine_grid(jnp, theta, size):
    """PyTorch's ``affine_grid`` (``align_corners=False``) in jnp: each
    output pixel's centre, normalised to ``[-1, 1]``, mapped by ``theta``
    ``[N, 2, 3]``."""
    base = (2 * jnp.arange(size, dtype=jnp.float32) + 1) / size - 1
    y, x = jnp.meshgrid(base, base, indexing="ij")
    points = jnp.stack([x, y, jnp.ones_like(x)], axis=-1)  # [H, W, 3]
    return jnp.einsum("hwk,nik->nhwi", points, theta)


@pytest.mark.parametrize("mode", MODES)
def test_jax_spatial_transformer_trains_through_the_sampler(mode):
    jax, cgj = adapter("jax", "cropgrad.jax")
    import jax.numpy as jnp

    images, labels = problem()
    rng = np.random.default_rng(0)
    params = {
        "conv": 0.3 * rng.standard_normal((CHANNELS, 1, 3, 3)).astype(np.float32),
        "conv_bias": np.zeros(CHANNELS, np.float32),
        # The identity transform to start with.
        "locate": np.zeros((36, 6), np.float32),
        "locate_bias": np.array([1.0, 0, 0, 0, 1, 0], np.float32),
        "classify": 0.05
        * rng.standard_normal((CHANNELS * CENTRE * CENTRE, CLASSES)).astype(np.float32),
    }
    lo, hi = (SIZE - CENTRE) // 2, (SIZE + CENTRE) // 2
    options = dict(mode=mode, padding_mode="zeros", align_corners=False)
    one_hot = np.eye(CLASSES, dtype=np.float32)[labels]

    def before(p):
        """The feature map and the grid: the sampler's inputs."""
        maps = jax.lax.conv_general_dilated(images, p["conv"], (1, 1), "SAME")
        maps = jax.nn.relu(maps + p["conv_bias"][:, None, None])
        pooled = images.reshape(BATCH, 6, 4, 6, 4).mean(axis=(2, 4))
        theta = pooled.reshape(BATCH, 36) @ p["locate"] + p["locate_bias"]
        return maps, affine_grid(jnp, theta.reshape(BATCH, 2, 3), SIZE), theta

    def after(p, out):
        logits = out[:, :, lo:hi, lo:hi].reshape(BATCH, -1) @ p["classify"]
        return -jnp.mean(jnp.sum(one_hot * jax.nn.log_softmax(logits), axis=1))

    def loss(p):
        maps, grid, _ = before(p)
        return after(p, cgj.grid_sample(maps, grid, **options))

    step = jax.jit(jax.value_and_grad(loss))
    losses = []
    for _ in range(STEPS):
        value, grads = step(params)
        losses.append(float(value))
        params = jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    # One step's sampler gradients against the NumPy API's.
    maps, grid, theta = before(params)
    out, vjp = jax.vjp(lambda m, g: cgj.grid_sample(m, g, **options), maps, grid)
    out_grad = jax.grad(after, 1)(params, out)
    d_maps, d_grid = vjp(out_grad)
    g, m, x = (np.asarray(a) for a in (out_grad, maps, grid))
    assert_same_bits(
        np.asarray(d_maps),
        cropgrad.grid_sample_grad_image(g, x, m.shape, flush_denormals=True, **options),
    )
    assert_same_bits(
        np.asarray(d_grid),
        cropgrad.grid_sample_grad_grid(g, m, x, flush_denormals=True, **options),
    )
    identity = np.array([1.0, 0, 0, 0, 1, 0])
    moved = float(np.abs(np.asarray(theta) - identity).max())
    print(f"{mode}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, theta moved {moved:.3g}")
    assert losses[-1] < 0.1 * losses[0], losses
    assert moved > 1e-2
