from cropgrad import raw_ops as raw_ops
from cropgrad._api.config import show_config as show_config
from cropgrad._api.crop_and_resize import crop_and_resize as crop_and_resize
from cropgrad._api.crop_and_resize import (
    crop_and_resize_grad_boxes as crop_and_resize_grad_boxes,
)
from cropgrad._api.crop_and_resize import (
    crop_and_resize_grad_image as crop_and_resize_grad_image,
)
from cropgrad._api.crop_and_resize import (
    crop_and_resize_jvp_boxes as crop_and_resize_jvp_boxes,
)
from cropgrad._api.grid_sample import grid_sample as grid_sample
from cropgrad._api.grid_sample import grid_sample_grad_grid as grid_sample_grad_grid
from cropgrad._api.grid_sample import grid_sample_grad_image as grid_sample_grad_image
from cropgrad._api.grid_sample import grid_sample_jvp_grid as grid_sample_jvp_grid
from cropgrad._api.roi_align import roi_align as roi_align
from cropgrad._api.roi_align import roi_align_grad_boxes as roi_align_grad_boxes
from cropgrad._api.roi_align import roi_align_grad_image as roi_align_grad_image
from cropgrad._api.roi_align import roi_align_jvp_boxes as roi_align_jvp_boxes
from cropgrad._version import __version__ as __version__

__all__ = [
    "crop_and_resize",
    "crop_and_resize_grad_boxes",
    "crop_and_resize_grad_image",
    "crop_and_resize_jvp_boxes",
    "get_include",
    "grid_sample",
    "grid_sample_grad_grid",
    "grid_sample_grad_image",
    "grid_sample_jvp_grid",
    "raw_ops",
    "roi_align",
    "roi_align_grad_boxes",
    "roi_align_grad_image",
    "roi_align_jvp_boxes",
    "show_config",
]

def get_include() -> str: ...
