"""Element types of the .oab format (c10::ScalarType numbering), without importing torch:
`inspect`, `run` and `test` must start in well under a second."""

from __future__ import annotations

import numpy as np

# name -> (code, numpy dtype)
_TABLE: dict[str, tuple[int, np.dtype]] = {
    "uint8": (0, np.dtype(np.uint8)),
    "int8": (1, np.dtype(np.int8)),
    "int16": (2, np.dtype(np.int16)),
    "int32": (3, np.dtype(np.int32)),
    "int64": (4, np.dtype(np.int64)),
    "float16": (5, np.dtype(np.float16)),
    "float32": (6, np.dtype(np.float32)),
    "float64": (7, np.dtype(np.float64)),
    "complex64": (9, np.dtype(np.complex64)),  # interleaved float32 (real, imaginary) pairs
    "bool": (11, np.dtype(np.bool_)),
    "bfloat16": (15, np.dtype(np.uint16)),  # stored as raw 16-bit words
}
_BY_CODE = {code: name for name, (code, _) in _TABLE.items()}


def code_of(name: str) -> int:
    return _TABLE[name][0]


def name_of(code: int) -> str:
    return _BY_CODE.get(code, f"unknown({code})")


def numpy_of(code: int) -> np.dtype:
    return _TABLE[name_of(code)][1]


def size_of(code: int) -> int:
    return 2 if name_of(code) == "bfloat16" else numpy_of(code).itemsize


def code_of_numpy(dt: np.dtype) -> int:
    for _, (code, npdt) in _TABLE.items():
        if npdt == dt and code != 15:
            return code
    raise KeyError(f"numpy dtype {dt} has no .oab encoding")


def known_codes() -> list[int]:
    return sorted(_BY_CODE)
