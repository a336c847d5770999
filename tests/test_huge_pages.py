"""Huge pages for large results: cropgrad._core.advise_huge_pages, the
tensors cropgrad.torch allocates (PyTorch's own allocator does not ask) and
the results XLA hands cropgrad.jax's handlers (nor does XLA's).

The PyTorch and JAX parts are skipped when their framework is not
installed, unless CROPGRAD_REQUIRE_ADAPTERS=1 (CI sets it).
"""

import mmap
import sys

import numpy as np
import pytest
from _helpers import missing

import cropgrad
from cropgrad import _core

try:
    import torch
except ImportError as exc:
    torch = None
    cgt = None
    TORCH_ERROR = str(exc)
else:
    import cropgrad.torch as cgt

try:
    import cropgrad.jax as cgj
except ImportError as exc:
    cgj = None
    JAX_ERROR = str(exc)

linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="MADV_HUGEPAGE is Linux's"
)


@pytest.fixture
def torch_installed():
    """Skip without PyTorch (fail under CROPGRAD_REQUIRE_ADAPTERS=1)."""
    if torch is None:
        missing(
            f"PyTorch cannot be imported ({TORCH_ERROR})", "CROPGRAD_REQUIRE_ADAPTERS"
        )


needs_torch = pytest.mark.usefixtures("torch_installed")


def _vm_flags(address):
    """The VmFlags of the mapping holding `address` (/proc/self/smaps)."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(maxsplit=1)[0]
            if "-" in first and not first.endswith(":"):
                lo, hi = (int(x, 16) for x in first.split("-"))
                inside = lo <= address < hi
            elif inside and first == "VmFlags:":
                return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


def _mapped(nbytes):
    return mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


@linux
def test_advice_marks_the_mapping():
    block = _mapped(16 << 20)
    address = np.frombuffer(block, np.uint8).ctypes.data
    assert "hg" not in _vm_flags(address)
    assert _core.advise_huge_pages(address, len(block)) == 0
    assert "hg" in _vm_flags(address)


@linux
def test_nothing_to_advise_without_a_whole_page():
    block = _mapped(mmap.PAGESIZE)
    address = np.frombuffer(block, np.uint8).ctypes.data
    assert _core.advise_huge_pages(address + 1, mmap.PAGESIZE - 1) == 1
    assert _core.advise_huge_pages(address, 0) == 1
    assert "hg" not in _vm_flags(address)


@linux
def test_unmapped_memory_is_refused_not_touched():
    block = _mapped(4 * mmap.PAGESIZE)
    address = np.frombuffer(block, np.uint8).ctypes.data
    block.close()
    assert _core.advise_huge_pages(address, 4 * mmap.PAGESIZE) == -1


@linux
@needs_torch
@pytest.mark.parametrize("memory_format", ["contiguous", "channels_last"])
def test_large_torch_results_get_huge_pages(memory_format, monkeypatch):
    rng = np.random.default_rng(0)
    image = torch.from_numpy(rng.standard_normal((1, 32, 16, 16), np.float32))
    if memory_format == "channels_last":
        image = image.to(memory_format=torch.channels_last)
    boxes = torch.tensor([[0.1, 0.1, 0.9, 0.9]] * 64)
    box_ind = torch.zeros(64, dtype=torch.int32)
    # 64 crops of 32 x 32 x 32 float32: 8 MiB, past the 4 MiB threshold.
    crops = cgt.crop_and_resize(image, boxes, box_ind, (32, 32))
    assert crops.untyped_storage().nbytes() == 8 << 20
    assert "hg" in _vm_flags(crops.data_ptr() + (4 << 20))
    # A small result is not advised.  (Its memory's flags cannot show it:
    # the allocator may place it in a region some earlier large block had
    # advised.)
    from cropgrad._torch import tensors

    advised = []
    monkeypatch.setattr(
        tensors._core, "advise_huge_pages", lambda *a: advised.append(a) or 0
    )
    small = cgt.crop_and_resize(image, boxes[:1], box_ind[:1], (4, 4))
    assert small.numel() * 4 < 4 << 20
    assert advised == []
    cgt.crop_and_resize(image, boxes, box_ind, (32, 32))
    assert len(advised) == 1


@needs_torch
def test_large_results_under_torch_compile():
    # torch.compile traces with fake tensors, which have no memory: only
    # the CPU kernel may advise.  The result, 8 MiB, gets the advice.
    image = torch.randn(1, 32, 16, 16)
    boxes = torch.tensor([[0.1, 0.1, 0.9, 0.9]] * 64)
    box_ind = torch.zeros(64, dtype=torch.int32)

    def crops(image, boxes, box_ind):
        return cgt.crop_and_resize(image, boxes, box_ind, (32, 32))

    torch._dynamo.reset()
    compiled = torch.compile(crops, fullgraph=True)(image, boxes, box_ind)
    assert compiled.numel() * 4 == 8 << 20
    assert torch.equal(compiled, crops(image, boxes, box_ind))
    if sys.platform.startswith("linux"):
        assert "hg" in _vm_flags(compiled.data_ptr() + (4 << 20))


@linux
def test_large_jax_results_get_huge_pages():
    # 64 crops of 32 x 32 x 32 float32: 8 MiB, past the threshold.  XLA gives
    # each call's result new memory, which the handler advises before the
    # op writes it.
    if cgj is None:
        missing(
            f"cropgrad.jax cannot be imported ({JAX_ERROR})",
            "CROPGRAD_REQUIRE_ADAPTERS",
        )
    rng = np.random.default_rng(0)
    image = rng.standard_normal((1, 16, 16, 32), np.float32)
    boxes = np.array([[0.1, 0.1, 0.9, 0.9]] * 64, np.float32)
    box_ind = np.zeros(64, np.int32)
    crops = cgj.crop_and_resize(image, boxes, box_ind, (32, 32))
    crops.block_until_ready()
    expected = cropgrad.crop_and_resize(image, boxes, box_ind, (32, 32))
    assert np.array_equal(np.asarray(crops), expected)
    assert crops.size * 4 == 8 << 20 >= _core.HUGE_PAGES_FROM
    assert "hg" in _vm_flags(crops.unsafe_buffer_pointer() + (4 << 20))
