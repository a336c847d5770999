import numpy as np
import numpy.typing as npt

MODE_CODES: dict[str, int]
PADDING_CODES: dict[str, int]

def forward(
    image: npt.NDArray[np.floating],
    grid: npt.NDArray[np.floating],
    out: npt.NDArray[np.floating],
    mode: int,
    padding: int,
    aligned: bool,
    num_threads: int,
    flush: bool,
) -> None: ...
def slopes(
    image: npt.NDArray[np.floating],
    grid: npt.NDArray[np.floating],
    grads: npt.NDArray[np.floating] | None,
    tangent: npt.NDArray[np.floating] | None,
    out: npt.NDArray[np.floating],
    mode: int,
    padding: int,
    aligned: bool,
    num_threads: int,
    flush: bool,
) -> None: ...
def grad_image(
    grads: npt.NDArray[np.floating],
    grid: npt.NDArray[np.floating],
    out: npt.NDArray[np.floating],
    mode: int,
    padding: int,
    aligned: bool,
    num_threads: int,
    flush: bool,
) -> None: ...
def use_simd(on: bool) -> bool: ...
