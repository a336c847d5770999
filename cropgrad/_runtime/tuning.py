"""The machine's caches, and the kernel sizes chosen from them (private).

Read once, when the kernel modules are imported.  These choices change
how fast the image gradient runs, never its bits: every banding, and the
prefetch or not, goes through the same arithmetic (DEVELOPING.md, "The same
machine code for every banding"), and none of them depends on the number
of threads.
"""

import os

_SYSFS = "/sys/devices/system/cpu/cpu0/cache"

# Sizes assumed where the system does not say (the machine the fixed sizes
# were first measured on: 2 MiB of L2 per core, about 2 MiB of L3 per core).
DEFAULT_L2 = 2 << 20
DEFAULT_L3_SHARE = 2 << 20


def _parse_size(text):
    """``"1024K"`` -> 1048576 (sysfs spells sizes with a K or M suffix)."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * scale


def _count_cpus(cpu_list):
    """``"0-3,8"`` -> 5."""
    count = 0
    for part in cpu_list.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def _read(path):
    with open(path) as f:
        return f.read().strip()


def read_caches(sysfs=_SYSFS):
    """The data caches of CPU 0: ``{level: (bytes, cpus sharing it)}``.

    From Linux's sysfs; then ``os.sysconf`` (which gives no sharing, and on
    some machines the L3 of the whole package); ``{}`` where neither says.
    """
    caches = {}
    try:
        entries = sorted(os.listdir(sysfs))
    except OSError:
        entries = []
    for entry in entries:
        if not entry.startswith("index"):
            continue
        base = os.path.join(sysfs, entry)
        try:
            if _read(os.path.join(base, "type")) == "Instruction":
                continue
            level = int(_read(os.path.join(base, "level")))
            size = _parse_size(_read(os.path.join(base, "size")))
        except (OSError, ValueError):
            continue
        try:
            sharing = _count_cpus(_read(os.path.join(base, "shared_cpu_list")))
        except (OSError, ValueError):
            sharing = None
        if size > 0:
            caches[level] = (size, sharing)
    if caches or not hasattr(os, "sysconf"):
        return caches
    for level, name in ((2, "SC_LEVEL2_CACHE_SIZE"), (3, "SC_LEVEL3_CACHE_SIZE")):
        try:
            size = os.sysconf(name)
        except (ValueError, OSError):
            continue
        if size and size > 0:
            caches[level] = (size, None)
    return caches


def cache_sizes(caches=None):
    """(L2 bytes per core, L3 bytes per core): the shares one thread can
    count on, with the defaults where the machine does not say."""
    if caches is None:
        caches = read_caches()
    l2 = DEFAULT_L2
    if 2 in caches:
        size, sharing = caches[2]
        l2 = size // max(sharing or 1, 1)
    l3_share = DEFAULT_L3_SHARE
    if 3 in caches:
        size, sharing = caches[3]
        if sharing is None:
            sharing = os.cpu_count() or 1
        l3_share = size // max(sharing, 1)
    return l2, l3_share


def choose(l2, l3_share):
    """The image gradient's sizes for caches of these sizes (bytes per core).

    Returns a dict: ``band_bytes`` (output rows one task accumulates),
    ``tasks_per_thread`` (bands per thread of a team), ``prefetch_bytes``
    and ``prefetch_min_depth`` (how far ahead to ask for grads, and from
    which depth).

    Where the L2 holds a band of 1 MiB with as much again for the grads
    streaming past (2 MiB or more), bands of half the L2 stay there while a
    task walks the boxes; the hardware prefetcher then keeps up with grads
    of up to 64 channels (the prefetch hint only costs time there).  With a
    smaller L2 (1 MiB on AMD's Zen 4 and Zen 5) no band survives the grads
    stream in the L2 anyway, and every extra band only makes the task read
    grads in more, sparser passes (each band skips the crop rows of the
    others), which the hardware prefetcher follows badly: the profile shows
    the scatter waiting on its grads loads.  Then bands and NCHW tiles
    (``tile_bytes``) are sized to a quarter of the core's share of the L3,
    one band per thread, and grads are prefetched from 16 channels on.
    The same holds with Zen 3's 512 KiB: there the first branch's sizes
    (256 KiB bands, four per thread, no prefetch below 128 channels) took
    1.04 to 1.52 times as long on the detector and dense problems, and 256
    KiB or 1 MiB bands with the other choices of this one 0.98 to 1.28
    times as long (medians of 15 alternating calls, one and two threads).
    """
    if l2 >= 2 << 20:
        return {
            "band_bytes": l2 // 2,
            "tasks_per_thread": 4,
            "prefetch_bytes": 2048,
            "prefetch_min_depth": 128,
            "tile_bytes": l2 // 2,
        }
    return {
        # A quarter of the L3 share: one band for the dense workload's 4 MiB
        # output (1.8x faster than 1 MiB bands), while the float64 detector's
        # 16 MiB output still takes four (half the share was 1.15x slower).
        "band_bytes": max(l3_share // 4, l2 // 2, 1 << 18),
        "tasks_per_thread": 1,
        "prefetch_bytes": 2048,
        "prefetch_min_depth": 16,
        # NCHW tiles are scratch per thread: a quarter of the L3 share
        # (4 MiB: a whole image of the dense workload's 64 channels, so its
        # grads are gathered once, 1.4x faster than 1 MiB tiles).
        "tile_bytes": max(l3_share // 4, l2 // 2, 1 << 18),
    }


# RoIAlign's NCHW tiles (cropgrad/_kernels/roi_align/tiles.pxd): a
# thread's tile of planes side by side.  A box reads only its window of
# the tile, so the tile need not fit the L2; what it buys is channels per
# pass (at most 128), each box's output then written in fewer, longer
# runs.  On the Xeon with 2 MiB of L2 (a 100 x 136 map, 1024 boxes), 8 MiB
# tiles (128 channels) took 1.13-1.20x the NHWC time in the three ops, 4
# MiB (64) 1.30-1.38x and 16 MiB (256) 1.19-1.30x; on a 200 x 272 map (32
# channels) 8 MiB and 4 MiB were alike, 16 MiB 1.2x slower.
ROI_TILE_BYTES = 8 << 20


def stream_bytes(caches=None):
    """From what size a result is written around the caches (bytes).

    A result larger than the last-level cache is evicted before it is read
    again anyway; streaming stores then save reading every line from memory
    before it is written.  Smaller results stay in cache for their reader.
    The L3's size, but at most `STREAM_CAP`; 32 MiB where the machine does
    not say.
    """
    if caches is None:
        caches = read_caches()
    level = max(caches, default=None)
    if level is None or level < 2:
        return STREAM_CAP
    return min(caches[level][0], STREAM_CAP)


# A virtual machine may report its host's whole L3 (480 MiB on the Xeon
# measured, "shared" by its 2 CPUs), of which a guest's writes get far
# less: there, ordinary stores wrote 19-21 GB/s on 2 threads from 8 MiB to
# 256 MiB alike, streaming ones 20 GB/s at 16 MiB, 29 GB/s at 32 MiB and 45
# GB/s at 256 MiB.  32 MiB is also a whole L3 of the AMD CPUs measured.
STREAM_CAP = 32 << 20


def tuning():
    """The sizes for this machine, and the cache sizes they come from."""
    l2, l3_share = cache_sizes()
    return {"l2": l2, "l3_share": l3_share, **choose(l2, l3_share)}
