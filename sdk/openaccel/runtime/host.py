"""ctypes binding to the host build of libopenaccel (built with CMake on first use, cached).

Struct mirrors are checked against the library's own sizes (oa_abi_sizeof) when it is loaded,
so a mismatch is an error at load time, not memory corruption later.
"""

from __future__ import annotations

import ctypes as C
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes
from ..errors import CpuFeatureError, InputError, ProgramError, RuntimeFailure
from .build import build_runtime

MAX_DIMS = 8

STATUS_NAMES = {0: "OK", 1: "INVALID_ARGUMENT", 2: "INVALID_PROGRAM", 3: "UNSUPPORTED_VERSION",
                4: "UNSUPPORTED", 5: "OUT_OF_MEMORY", 6: "NOT_FOUND", 7: "NOT_READY", 8: "TIMEOUT",
                9: "DEVICE", 10: "IO", 11: "INTERNAL", 12: "CHECK_FAILED"}
STATUS_INVALID_PROGRAM = 2


class QuantParams(C.Structure):
    """oa_quant_params_t: scale NULL when the tensor carries none."""

    _fields_ = [("scale", C.POINTER(C.c_float)), ("zero_point", C.POINTER(C.c_int64)), ("axis", C.c_int32),
                ("count", C.c_uint32)]


class Tensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("shape", C.c_int64 * MAX_DIMS), ("ndim", C.c_int32),
                ("dtype", C.c_int32), ("numel", C.c_int64), ("nbytes", C.c_size_t), ("name", C.c_char_p),
                ("quant", QuantParams)]


class Diag(C.Structure):
    _fields_ = [("status", C.c_int), ("message", C.c_char * 512)]


class TestResult(C.Structure):
    _fields_ = [("name", C.c_char_p), ("passed", C.c_int), ("atol", C.c_double), ("rtol", C.c_double),
                ("max_abs_error", C.c_double), ("max_rel_error", C.c_double), ("mismatches", C.c_int64),
                ("first_mismatch", C.c_int64), ("worst_output", C.c_uint32), ("elapsed_ns", C.c_uint64)]


class Requirements(C.Structure):
    _fields_ = [("state_bytes", C.c_size_t), ("arena_bytes", C.c_size_t), ("scratch_bytes", C.c_size_t),
                ("total_bytes", C.c_size_t)]


class CpuOptions(C.Structure):
    # allocator: const oa_allocator_t * (NULL: the platform's); disable_isas: OA_CPU_ISA_* bits
    _fields_ = [("reference_only", C.c_int32), ("threads", C.c_int32), ("allocator", C.c_void_p),
                ("disable_isas", C.c_uint32)]


# OA_CPU_ISA_* of openaccel/cpu.h: the instruction sets of the optimized CPU kernels
CPU_ISAS = {"portable": 1 << 0, "avx2": 1 << 1, "neon": 1 << 2, "avx512": 1 << 3, "rvv": 1 << 4}
# OA_CPU_ISA_VNNI: not an ISA but an option of two, the int8 dot products (vpdpbusd) inside the
# avx512 kernels (AVX512-VNNI) and the avx2 ones (AVX-VNNI); `isas` without it keeps their plain tiles
# OA_CPU_ISA_AMX: another option of the avx512 kernels, the AMX int8 tiles of conv2d_q8 / linear_q8
CPU_ISA_OPTIONS = {"vnni": 1 << 5, "amx": 1 << 6}


def disable_isas_mask(isas: Sequence[str] | None) -> int:
    """oa_cpu_options_t.disable_isas for `isas` (the ISAs the optimized kernels may use; None: all)."""
    if isas is None:
        return 0
    known = {**CPU_ISAS, **CPU_ISA_OPTIONS}
    unknown = sorted(set(isas) - set(known))
    if unknown:
        raise ValueError(f"unknown CPU ISA {', '.join(unknown)} (known: {', '.join(known)})")
    keep = 0
    for name in isas:
        keep |= known[name]
    return 0xFFFFFFFF & ~keep


class MethodConfig(C.Structure):
    _fields_ = [("devices", C.POINTER(C.c_void_p)), ("n_devices", C.c_uint32)]


class DeviceProperties(C.Structure):
    _fields_ = [("name", C.c_char * 64), ("vendor", C.c_char * 64), ("kind_name", C.c_char * 32),
                ("kind", C.c_int), ("memory_total", C.c_uint64), ("memory_free", C.c_uint64),
                ("alignment", C.c_uint32), ("flags", C.c_uint32)]


_MIRRORS = {"oa_tensor_t": Tensor, "oa_diag_t": Diag, "oa_test_result_t": TestResult,
            "oa_memory_requirements_t": Requirements, "oa_cpu_options_t": CpuOptions,
            "oa_method_config_t": MethodConfig, "oa_device_properties_t": DeviceProperties}

_lib: C.CDLL | None = None
_lib_lock = threading.Lock()


def library() -> C.CDLL:
    """The host libopenaccel, built on first use."""
    global _lib
    with _lib_lock:
        if _lib is None:
            build = build_runtime("host")
            assert build.shared_lib is not None
            # global, so vendor device libraries loaded later can resolve oa_* helpers from it
            lib = C.CDLL(str(build.shared_lib), mode=C.RTLD_GLOBAL)
            lib.oa_abi_sizeof.restype = C.c_size_t
            lib.oa_abi_sizeof.argtypes = [C.c_char_p]
            for name, mirror in _MIRRORS.items():
                want = lib.oa_abi_sizeof(name.encode())
                if want != C.sizeof(mirror):
                    raise RuntimeFailure(f"ABI mismatch: {name} is {want} bytes in the runtime, "
                                         f"{C.sizeof(mirror)} in the Python binding")
            vp, u32, i32 = C.c_void_p, C.c_uint32, C.c_int
            sigs: dict[str, tuple[Any, list[Any]]] = {
                "oa_program_load": (i32, [vp, C.c_size_t, vp, C.POINTER(Diag)]),
                "oa_cpu_device_init": (i32, [vp, C.POINTER(CpuOptions), C.POINTER(vp)]),
                "oa_method_requirements": (i32, [vp, u32, C.POINTER(MethodConfig), C.POINTER(Requirements),
                                                 C.POINTER(Diag)]),
                "oa_method_create": (i32, [vp, u32, C.POINTER(MethodConfig), C.POINTER(vp), C.POINTER(Diag)]),
                "oa_method_destroy": (None, [vp]),
                "oa_method_execute": (i32, [vp, C.POINTER(Diag)]),
                "oa_method_input_count": (u32, [vp]),
                "oa_method_output_count": (u32, [vp]),
                "oa_method_test_count": (u32, [vp]),
                "oa_method_input": (i32, [vp, u32, C.POINTER(C.POINTER(Tensor))]),
                "oa_method_output": (i32, [vp, u32, C.POINTER(C.POINTER(Tensor))]),
                "oa_method_set_input": (i32, [vp, u32, C.POINTER(Tensor), C.POINTER(Diag)]),
                "oa_method_run_test": (i32, [vp, u32, C.POINTER(TestResult), C.POINTER(Diag)]),
                "oa_device_get_properties": (i32, [vp, C.POINTER(DeviceProperties)]),
                "oa_device_query_i64": (i32, [vp, C.c_char_p, C.c_char_p, C.POINTER(C.c_int64)]),
                "oa_cpu_kernel_op_name": (C.c_char_p, [u32]),
                "oa_cpu_check_required_features": (i32, [vp, vp, C.POINTER(Diag)]),
                "oa_cpu_device_factory": (vp, []),
                "oa_cpu_device_deinit": (None, [vp]),
                "oa_registry_init": (None, [vp, vp]),
                "oa_registry_register": (i32, [vp, vp]),
                "oa_registry_enumerate": (i32, [vp, C.POINTER(vp), u32, C.POINTER(u32), C.POINTER(Diag)]),
                "oa_registry_release": (None, [vp]),
                "oa_version": (C.c_char_p, []),
            }
            for fname, (res, args) in sigs.items():
                fn = getattr(lib, fname)
                fn.restype = res
                fn.argtypes = args
            _lib = lib
        return _lib


def kernel_ops() -> list[str]:
    """Op names the host runtime has CPU kernels for."""
    lib = library()
    out: list[str] = []
    i = 0
    while True:
        name = lib.oa_cpu_kernel_op_name(i)
        if not name:
            return out
        out.append(name.decode())
        i += 1


def _aligned_copy(data: bytes, alignment: int = 64) -> tuple[np.ndarray, int]:
    raw = np.empty(len(data) + alignment, dtype=np.uint8)
    off = (-raw.ctypes.data) % alignment
    view = raw[off:off + len(data)]
    view[:] = np.frombuffer(data, dtype=np.uint8)
    return raw, raw.ctypes.data + off


def _fail(kind: type[Exception], status: int, diag: Diag, what: str) -> Exception:
    msg = diag.message.decode("utf-8", "replace")
    return kind(f"{what}: {STATUS_NAMES.get(status, status)}: {msg}")


@dataclass
class TestReport:
    name: str
    passed: bool
    max_abs_error: float
    max_rel_error: float
    atol: float
    rtol: float
    mismatches: int
    first_mismatch: int
    output: int
    ms: float
    error: str = ""


class CpuDevice:
    """A CPU device object living in Python-owned memory."""

    def __init__(self, reference_only: bool = False, threads: int = 0, isas: Sequence[str] | None = None) -> None:
        lib = library()
        self._mem = (C.c_uint64 * ((lib.oa_abi_sizeof(b"oa_cpu_device_t") + 7) // 8))()
        self.handle = C.c_void_p()
        opts = CpuOptions(int(reference_only), int(threads), None, disable_isas_mask(isas))
        st = lib.oa_cpu_device_init(C.addressof(self._mem), C.byref(opts), C.byref(self.handle))
        if st:
            raise RuntimeFailure(f"CPU device init failed: {STATUS_NAMES.get(st, st)}")

    def __del__(self) -> None:
        if getattr(self, "_mem", None) is not None:
            library().oa_cpu_device_deinit(C.addressof(self._mem))
            self._mem = None

    def properties(self) -> dict[str, Any]:
        lib = library()
        p = DeviceProperties()
        lib.oa_device_get_properties(self.handle, C.byref(p))
        queries = {}
        for key in ("arch", "neon", "fp16", "dotprod", "sse4_1", "avx", "avx2", "fma", "f16c", "avx512f",
                    "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx_vnni", "amx_tile", "amx_int8",
                    "amx_bf16", "v", "vlen", "i8mm", "cores", "l1d_bytes", "l2_bytes", "l3_bytes", "threads", "isas"):
            v = C.c_int64()
            if lib.oa_device_query_i64(self.handle, b"cpu", key.encode(), C.byref(v)) == 0:
                queries[f"cpu.{key}"] = v.value
        return {"index": 0, "name": p.name.decode(), "vendor": p.vendor.decode(),
                "kind": p.kind_name.decode(), "memory_total": p.memory_total, "memory_free": p.memory_free,
                "alignment": p.alignment, "flags": p.flags, "queries": queries}


class VendorDevices:
    """Devices of vendor libraries (each exports `oa_device_factory`), in one registry."""

    def __init__(self, paths: list[str]) -> None:
        lib = self._lib = library()
        self._libs = []
        self._reg = (C.c_uint64 * ((lib.oa_abi_sizeof(b"oa_registry_t") + 7) // 8))()
        lib.oa_registry_init(C.addressof(self._reg), None)
        for p in paths:
            try:
                vlib = C.CDLL(str(p))
            except OSError as e:
                raise RuntimeFailure(f"cannot load device library {p}: {e}") from None
            try:
                get = vlib.oa_device_factory
            except AttributeError:
                raise RuntimeFailure(f"{p} has no oa_device_factory symbol (not a vendor device library?)") from None
            get.restype = C.c_void_p
            st = lib.oa_registry_register(C.addressof(self._reg), get())
            if st:
                raise RuntimeFailure(f"{p}: its device factory was refused ({STATUS_NAMES.get(st, st)})")
            self._libs.append(vlib)
        arr = (C.c_void_p * 16)()
        n = C.c_uint32()
        diag = Diag()
        st = lib.oa_registry_enumerate(C.addressof(self._reg), arr, 16, C.byref(n), C.byref(diag))
        if st:
            raise _fail(RuntimeFailure, st, diag, "creating vendor devices")
        self.handles = [arr[i] for i in range(min(n.value, 16))]

    def __del__(self) -> None:
        if getattr(self, "_reg", None) is not None:
            self._lib.oa_registry_release(C.addressof(self._reg))


class HostSession:
    """A loaded and prepared program on the host CPU (plus vendor devices, if given).

    Safe to call from several threads: calls are serialized by a lock. A session is one method
    with one arena (inputs, intermediates and outputs live in it), and ctypes releases the GIL
    during the C call, so two unserialized calls would overwrite each other's inputs. For calls
    in parallel, load one Module per thread (each gets its own arena and CPU device)."""

    def __init__(self, buffer: bytes, *, threads: int = 0, reference_only: bool = False,
                 device_libs: list[str] | None = None, isas: Sequence[str] | None = None) -> None:
        lib = self._lib = library()
        self._lock = threading.Lock()
        self._raw, addr = _aligned_copy(buffer)
        self._program = (C.c_uint64 * ((lib.oa_abi_sizeof(b"oa_program_t") + 7) // 8))()
        diag = Diag()
        st = lib.oa_program_load(C.c_void_p(addr), len(buffer), C.addressof(self._program), C.byref(diag))
        if st:
            raise _fail(ProgramError, st, diag, "loading the program")
        self.device = CpuDevice(reference_only=reference_only, threads=threads, isas=isas)
        self._vendor = VendorDevices(device_libs) if device_libs else None
        handles = [self.device.handle.value] + (self._vendor.handles if self._vendor else [])
        self._devs = (C.c_void_p * len(handles))(*handles)
        self._cfg = MethodConfig(C.cast(self._devs, C.POINTER(C.c_void_p)), len(handles))
        st = lib.oa_cpu_check_required_features(C.addressof(self._program), self.device.handle, C.byref(diag))
        if st:
            raise _fail(ProgramError if st == STATUS_INVALID_PROGRAM else CpuFeatureError, st, diag,
                        "checking the CPU features the file needs")
        req = Requirements()
        st = lib.oa_method_requirements(C.addressof(self._program), 0, C.byref(self._cfg), C.byref(req), C.byref(diag))
        if st:
            raise _fail(RuntimeFailure, st, diag, "preparing the program")
        self.requirements = {"state_bytes": req.state_bytes, "arena_bytes": req.arena_bytes,
                             "scratch_bytes": req.scratch_bytes, "total_bytes": req.total_bytes}
        self._method = C.c_void_p()
        st = lib.oa_method_create(C.addressof(self._program), 0, C.byref(self._cfg), C.byref(self._method),
                                  C.byref(diag))
        if st:
            raise _fail(RuntimeFailure, st, diag, "preparing the program")

    def __del__(self) -> None:
        m = getattr(self, "_method", None)
        if m:
            self._lib.oa_method_destroy(m)
            self._method = C.c_void_p()
        self._vendor = None

    def _tensor(self, getter: Any, i: int) -> Tensor:
        p = C.POINTER(Tensor)()
        if getter(self._method, i, C.byref(p)):
            raise RuntimeFailure(f"no tensor {i}")
        return p.contents

    def input_specs(self) -> list[tuple[str, str, tuple[int, ...]]]:
        out = []
        for i in range(self._lib.oa_method_input_count(self._method)):
            t = self._tensor(self._lib.oa_method_input, i)
            out.append((t.name.decode(), dtypes.name_of(t.dtype), tuple(t.shape[: t.ndim])))
        return out

    def _bind_io(self) -> None:
        """Cache the input/output tensors' addresses and zero-copy NumPy views of the outputs:
        a call is then a few memmoves and one C call (the binding adds microseconds, not tens)."""
        lib = self._lib
        self._inputs: list[tuple[np.ndarray, np.dtype, tuple[int, ...]]] = []
        for i in range(lib.oa_method_input_count(self._method)):
            t = self._tensor(lib.oa_method_input, i)
            view = self._view(t)
            self._inputs.append((view, view.dtype, view.shape))
        self._out_views = [self._view(self._tensor(lib.oa_method_output, i))
                           for i in range(lib.oa_method_output_count(self._method))]
        self._diag = Diag()
        self._diag_ref = C.byref(self._diag)
        self._execute = lib.oa_method_execute

    @staticmethod
    def _view(t: Tensor) -> np.ndarray:
        """A NumPy array over a tensor's memory in the arena (an empty one for 0 bytes)."""
        shape = tuple(t.shape[: t.ndim])
        dt = dtypes.numpy_of(t.dtype)
        if not t.nbytes:
            return np.empty(shape, dtype=dt)
        raw = (C.c_uint8 * t.nbytes).from_address(t.data)
        return np.frombuffer(raw, dtype=dt).reshape(shape)

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        with self._lock:
            return self._run(arrays)

    def _run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        if not hasattr(self, "_out_views"):
            self._bind_io()
        if len(arrays) != len(self._inputs):
            raise InputError(f"the program takes {len(self._inputs)} inputs, {len(arrays)} were given")
        for i, (a, (view, dt, shape)) in enumerate(zip(arrays, self._inputs)):
            if a.dtype != dt or a.shape != shape:
                raise InputError(f"input {i}: expected {dt}{list(shape)}, received {a.dtype}{list(a.shape)}")
            np.copyto(view, a, casting="no")  # any strides; about 1 us where require + memmove took 3
        st = self._execute(self._method, self._diag_ref)
        if st:
            raise _fail(RuntimeFailure, st, self._diag, "executing")
        return [v.copy() for v in self._out_views]

    def run_tests(self) -> list[TestReport]:
        with self._lock:
            return self._run_tests()

    def _run_tests(self) -> list[TestReport]:
        lib = self._lib
        reports = []
        for i in range(lib.oa_method_test_count(self._method)):
            r = TestResult()
            diag = Diag()
            st = lib.oa_method_run_test(self._method, i, C.byref(r), C.byref(diag))
            if st:
                reports.append(TestReport(f"test {i}", False, float("inf"), float("inf"), 0, 0, -1, -1, 0, 0.0,
                                          error=f"{STATUS_NAMES.get(st, st)}: {diag.message.decode()}"))
                continue
            reports.append(TestReport(r.name.decode() if r.name else f"test {i}", bool(r.passed), r.max_abs_error,
                                      r.max_rel_error, r.atol, r.rtol, r.mismatches, r.first_mismatch,
                                      r.worst_output, r.elapsed_ns / 1e6))
        return reports
