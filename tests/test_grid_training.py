"""End to end: a spatial transformer trained through cropgrad's grid sampling.

A small localisation network reads each image and predicts an affine
transform (starting from the identity); the transform's sampling grid
(PyTorch's ``affine_grid``) resamples the image's feature map through
`cropgrad.torch.grid_sample`, and a classifier reads the result.  The
task needs the transform: the label is the quadrant holding a bright
square near a corner, and the classifier sees only the centre of the
resampled map, which the identity transform barely reaches.  The test
checks that

- the loss goes down over a few steps of plain gradient descent, and the
  transform moves away from the identity (the grid gradient trains it);
- the gradients the sampler sends to the feature map and to the grid are
  the NumPy API's image and grid gradients of that step's output
  gradient, bit for bit.

Skipped when PyTorch is missing, unless CROPGRAD_REQUIRE_ADAPTERS=1.
"""

import numpy as np
import pytest
from _helpers import adapter, assert_same_bits

import cropgrad

# Eight 24 x 24 images with a bright 6 x 6 square in one quadrant; 4
# feature channels; the classifier reads the resampled map's central 8 x 8.
BATCH, SIZE, CHANNELS, CLASSES, CENTRE = 8, 24, 4, 4, 8
STEPS, LEARNING_RATE = 25, 0.2
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
    assert losses[-1] < 0.8 * losses[0], losses
    assert moved > 1e-2
