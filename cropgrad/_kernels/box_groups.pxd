# cython: language_level=3
#
# Boxes grouped by image: the order in which the image gradient and the NCHW
# forward op walk the boxes of one image.

from libc.stdint cimport int64_t


cdef inline void group_boxes(const int64_t* box_ind, Py_ssize_t n,
                             Py_ssize_t batch, int64_t* order,
                             int64_t* starts) noexcept nogil:
    """Group the boxes by image, keeping their order within an image.

    A stable counting sort: ``order[starts[i]:starts[i + 1]]`` are the boxes
    of image ``i`` in increasing box number.  `order` has `n` entries,
    `starts` ``batch + 1``; `box_ind` is within ``[0, batch)``.
    """
    cdef Py_ssize_t b, i
    cdef int64_t v
    for i in range(batch + 1):
        starts[i] = 0
    for b in range(n):
        starts[box_ind[b] + 1] += 1
    for i in range(batch):
        starts[i + 1] += starts[i]
    # Place each box at its image's cursor, then shift the cursors (which
    # ended at the next image's start) back into starts.
    for b in range(n):
        v = box_ind[b]
        order[starts[v]] = b
        starts[v] += 1
    for i in range(batch, 0, -1):
        starts[i] = starts[i - 1]
    starts[0] = 0
