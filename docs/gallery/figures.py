"""The gallery's figures, drawn from cropgrad's results when the site is built.

Each public function draws one figure of docs/gallery.md (its ``plot``
directives name them).  The picture is matplotlib's sample photograph,
which matplotlib installs: nothing is downloaded.
"""

import matplotlib.cbook
import matplotlib.patches
import matplotlib.pyplot as plt
import numpy as np

import cropgrad

# Boxes in pixels of the photograph, [y1, x1, y2, x2], and their colours.
FACE = (130, 160, 330, 370)
BADGE = (45, 205, 115, 295)
FLAG = (0, 0, 300, 160)
COLOURS = ("tab:orange", "tab:cyan", "tab:pink")


def photograph():
    """matplotlib's portrait of Grace Hopper: uint8, (600, 512, 3)."""
    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as f:
        return plt.imread(f, format="jpeg")


def normalized(boxes, height, width):
    """Pixel boxes [y1, x1, y2, x2] as crop_and_resize's normalized ones."""
    scale = np.array([height - 1, width - 1, height - 1, width - 1], np.float32)
    return (np.asarray(boxes, np.float32) / scale).astype(np.float32)


def draw_box(ax, box, colour, **style):
    """A pixel box [y1, x1, y2, x2] as a rectangle on an image's axes."""
    y1, x1, y2, x2 = box
    style = {"linewidth": 2, "fill": False, **style}
    ax.add_patch(
        matplotlib.patches.Rectangle((x1, y1), x2 - x1, y2 - y1, ec=colour, **style)
    )


def bare(ax, title):
    ax.set_title(title, fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])


def crops():
    """The photograph, three boxes on it, and their 64x64 crops."""
    image = photograph()
    height, width = image.shape[:2]
    boxes = normalized([FACE, BADGE, FLAG], height, width)
    # uint8 pixels are read as they are; the crops are float32.
    out = cropgrad.crop_and_resize(image[None], boxes, [0, 0, 0], (64, 64))
    fig = plt.figure(figsize=(9, 4.2))
    grid = fig.add_gridspec(2, 4, width_ratios=(2.2, 1, 1, 1))
    ax = fig.add_subplot(grid[:, 0])
    ax.imshow(image)
    for box, colour in zip([FACE, BADGE, FLAG], COLOURS):
        draw_box(ax, box, colour)
    bare(ax, "image (600 x 512) and boxes")
    names = ("face: 200 x 210 px", "badge: 70 x 90 px", "flag: 300 x 160 px")
    for i, (name, colour) in enumerate(zip(names, COLOURS)):
        ax = fig.add_subplot(grid[0, i + 1])
        ax.imshow(out[i] / 255)
        for spine in ax.spines.values():
            spine.set_color(colour)
            spine.set_linewidth(3)
        bare(ax, name)
    # The same boxes upside down (y1 > y2) give the crops flipped.
    flipped = boxes[:, [2, 1, 0, 3]]
    out = cropgrad.crop_and_resize(image[None], flipped, [0, 0, 0], (64, 64))
    for i, colour in enumerate(COLOURS):
        ax = fig.add_subplot(grid[1, i + 1])
        ax.imshow(out[i] / 255)
        bare(ax, "y1 > y2: flipped")
    fig.suptitle("crop_and_resize: every crop 64 x 64, bilinear", fontsize=11)


def image_gradient():
    """Where the samples fall: the image gradient of the crops' sum."""
    image = photograph()
    height, width = image.shape[:2]
    boxes = normalized([FACE, BADGE], height, width)
    sizes = ((16, 16), (48, 48))
    # d(sum of crops)/d(image), one channel: each sample adds its bilinear
    # weights to the four pixels around it.  One call per crop size.
    total = np.zeros((1, height, width, 1), np.float32)
    for box, size in zip(boxes, sizes):
        ones = np.ones((1, *size, 1), np.float32)
        total += cropgrad.crop_and_resize_grad_image(ones, box[None], [0], total.shape)
    top, bottom, left, right = 30, 210, 140, 310  # the zoomed window
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), width_ratios=(1, 1.25))
    axes[0].imshow(image)
    for box, colour in zip([FACE, BADGE], COLOURS):
        draw_box(axes[0], box, colour)
    draw_box(axes[0], (top, left, bottom, right), "white", linestyle=":")
    bare(axes[0], "face -> 16 x 16 crop, badge -> 48 x 48 crop")
    shown = axes[1].imshow(
        total[0, top:bottom, left:right, 0],
        cmap="magma",
        interpolation="nearest",
        extent=(left - 0.5, right - 0.5, bottom - 0.5, top - 0.5),
    )
    fig.colorbar(shown, ax=axes[1], fraction=0.05)
    bare(axes[1], "image gradient of sum(crops), in the dotted window")
    fig.suptitle(
        "crop_and_resize_grad_image: each pixel gets the bilinear weights of "
        "the samples around it",
        fontsize=11,
    )


def _blurred_grey(image, sigma):
    """The photograph in grey, blurred: a wide valley for the box to descend."""
    grey = image.astype(np.float32).mean(axis=2) / 255
    radius = int(3 * sigma)
    taps = np.exp(-(np.arange(-radius, radius + 1) ** 2) / (2.0 * sigma**2))
    taps /= taps.sum()
    for axis in (0, 1):
        grey = np.apply_along_axis(np.convolve, axis, grey, taps, mode="same")
    return grey.astype(np.float32)


def boxes_gradient():
    """A box finds a template by gradient descent on its four coordinates."""
    image = photograph()
    height, width = image.shape[:2]
    grey = _blurred_grey(image, 12)[None, :, :, None]
    size = (32, 32)
    target_box = normalized([FACE], height, width)
    template = cropgrad.crop_and_resize(grey, target_box, [0], size)
    box = normalized([(165, 130, 345, 345)], height, width)
    path, losses = [box], []
    for step in range(100):
        crop = cropgrad.crop_and_resize(grey, box, [0], size)
        difference = crop - template  # the gradient of 0.5 * |crop - template|**2
        losses.append(0.5 * float(np.vdot(difference, difference)))
        d_box = cropgrad.crop_and_resize_grad_boxes(difference, grey, box, [0])
        box = box - 2e-4 / (1 + step / 20) * d_box
        path.append(box)
    pixels = np.array([height - 1, width - 1, height - 1, width - 1])
    fig, axes = plt.subplots(1, 2, figsize=(9, 4), width_ratios=(1, 1.2))
    axes[0].imshow(grey[0, :, :, 0], cmap="gray")
    for i in range(0, 40, 4):
        draw_box(axes[0], path[i][0] * pixels, "tab:cyan", linewidth=1, alpha=0.6)
    draw_box(axes[0], path[0][0] * pixels, "tab:cyan")
    draw_box(axes[0], path[-1][0] * pixels, "tab:orange")
    draw_box(axes[0], FACE, "white", linestyle=":")
    bare(axes[0], "start (cyan), every 4th step, end (orange)")
    axes[1].semilogy(losses)
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("0.5 |crop - template|²")
    axes[1].set_title("loss", fontsize=10)
    fig.suptitle(
        "crop_and_resize_grad_boxes: the box moves until its crop matches the face's",
        fontsize=11,
    )


def _bins(ax, left, top, right, bottom, bins, colour):
    """A box's bins as a grid of lines on an image's axes."""
    for k in range(bins + 1):
        x = left + k * (right - left) / bins
        y = top + k * (bottom - top) / bins
        ax.plot([x, x], [top, bottom], color=colour, linewidth=0.7)
        ax.plot([left, right], [y, y], color=colour, linewidth=0.7)


def roi_align():
    """RoIAlign's bins and samples on a stride-8 feature map."""
    image = photograph()
    stride, bins, ratio = 8, 7, 2
    # A stand-in for a backbone's feature map: 8 x 8 averages, NCHW.
    grey = image.astype(np.float32).mean(axis=2)
    rows, cols = grey.shape[0] // stride, grey.shape[1] // stride
    features = grey[: rows * stride, : cols * stride]
    features = features.reshape(rows, stride, cols, stride).mean(axis=(1, 3))
    features = features[None, None].astype(np.float32)
    # RoIAlign's boxes: [x1, y1, x2, y2] in the image's pixels.
    y1, x1, y2, x2 = FACE
    rois = np.array([[x1, y1, x2, y2]], np.float32)
    options = {"spatial_scale": 1 / stride, "sampling_ratio": ratio, "aligned": True}
    pooled = cropgrad.roi_align(features, rois, [0], bins, **options)
    weights = cropgrad.roi_align_grad_image(
        np.ones_like(pooled), rois, [0], features.shape, **options
    )
    # The box on the feature map (aligned=True shifts it by half a pixel),
    # and its samples: ratio x ratio per bin, evenly inside it.
    left, top, right, bottom = rois[0] / stride - 0.5
    steps = (np.arange(bins * ratio) + 0.5) / (bins * ratio)
    sample_x = left + steps * (right - left)
    sample_y = top + steps * (bottom - top)
    extent = (-0.5, cols - 0.5, rows - 0.5, -0.5)
    fig, axes = plt.subplots(1, 3, figsize=(9, 3.6), width_ratios=(1, 0.8, 1.2))
    axes[0].imshow(features[0, 0], cmap="gray", extent=extent)
    _bins(axes[0], left, top, right, bottom, bins, "tab:orange")
    bare(axes[0], f"feature map {rows} x {cols}, {bins} x {bins} bins")
    axes[1].imshow(pooled[0, 0], cmap="gray")
    bare(axes[1], f"roi_align: {bins} x {bins}")
    shown = axes[2].imshow(
        weights[0, 0], cmap="magma", extent=extent, interpolation="nearest"
    )
    fig.colorbar(shown, ax=axes[2], fraction=0.05)
    _bins(axes[2], left, top, right, bottom, bins, "tab:cyan")
    grid_x, grid_y = np.meshgrid(sample_x, sample_y)
    axes[2].scatter(grid_x, grid_y, s=2, color="white")
    axes[2].set_xlim(left - 1.5, right + 1.5)
    axes[2].set_ylim(bottom + 1.5, top - 1.5)
    bare(axes[2], "samples (white) and their weights")
    fig.suptitle(
        f"RoIAlign: aligned, {ratio} x {ratio} samples per bin, "
        f"spatial_scale 1/{stride}",
        fontsize=11,
    )
