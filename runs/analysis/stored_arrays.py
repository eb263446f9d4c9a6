"""Arrays as the bytes a finished run's derived rows keep (``.npz``).

What ``numpy.savez_compressed`` writes, read back by ``numpy.load`` alike,
but deflated at the fastest level: on the verdicts of 100,000 results
(item ids, states, values) it takes a seventh of the time of numpy's
default level for a fifth more bytes. They are written when a run ends,
and again whenever they are stale.
"""

from __future__ import annotations

import io
import zipfile

import numpy as np

# zlib's fastest level.
LEVEL = 1


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """``arrays`` as an ``.npz`` archive, each under its name."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(
        buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=LEVEL
    ) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(
                    member, np.asanyarray(array), allow_pickle=False
                )
    return buffer.getvalue()
