# Stub of layout.pyx.

import numpy as np
import numpy.typing as npt

def change_layout(
    src: npt.NDArray[np.generic],
    dst: npt.NDArray[np.generic],
    to_channels: bool,
    num_threads: int,
) -> None: ...
