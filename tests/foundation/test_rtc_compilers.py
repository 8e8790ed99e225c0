"""The run-time compilers' shared compile sequence (device/common.RtcCompiler) over fake binding
modules, so that the hiprtc path (no AMD GPU or hip-python here) runs the same steps as NVRTC:
program with in-memory headers, options, log kept, code read, program destroyed, a failed
compile raising DeviceError with the log."""
from __future__ import annotations

import types

import pytest

from hipdnn_cabi.device.common import DeviceError, Module, RtcCompiler, check


class _Prog:
    def createRef(self):           # hip-python hands the program to Destroy by reference
        return self


def _fake_rtc(prefix, code_call, fail=False):
    calls = []

    def create(src, name, n, srcs, names):
        calls.append(("create", name, n, tuple(names), tuple(srcs)))
        return 0, _Prog()

    def compile_(prog, n, opts):
        calls.append(("compile", tuple(opts)))
        return (1 if fail else 0,)

    def log_size(prog):
        return 0, 5

    def log(prog, buf):
        buf[:5] = b"note\0"
        return (0,)

    def code_size(prog):
        return 0, 3

    def code(prog, buf):
        buf[:3] = b"ELF"
        return (0,)

    def destroy(prog):
        calls.append(("destroy",))
        return (0,)

    m = types.SimpleNamespace(calls=calls)
    for fn, f in (("CreateProgram", create), ("CompileProgram", compile_),
                  ("GetProgramLogSize", log_size), ("GetProgramLog", log),
                  (f"Get{code_call}Size", code_size), (f"Get{code_call}", code),
                  ("DestroyProgram", destroy)):
        setattr(m, prefix + fn, f)
    return m


def _compiler(prefix, code_call, buffer, fail=False):
    rtc = _fake_rtc(prefix, code_call, fail)

    class C(RtcCompiler):
        label, default_arch = prefix, "arch0"
        _buffer = staticmethod(buffer)

        def default_options(self, arch):
            return [f"--arch={arch}"]

    C.rtc, C.prefix, C.code_call = rtc, prefix, code_call
    return C(), rtc


@pytest.mark.parametrize("prefix,code_call,buffer", [("nvrtc", "CUBIN", bytearray),
                                                     ("hiprtc", "Code", bytearray)])
def test_compile_sequence(prefix, code_call, buffer):
    c, rtc = _compiler(prefix, code_call, buffer)
    out = c.compile("src", "k.hip", options=["-O3"], headers={"h.h": "x"})
    assert out == b"ELF" and isinstance(out, bytes)
    assert c.last_log == "note"
    assert rtc.calls[0] == ("create", b"k.hip", 1, (b"h.h",), (b"x",))
    assert rtc.calls[1] == ("compile", (b"--arch=arch0", b"-O3"))
    assert rtc.calls[-1] == ("destroy",)


def test_failed_compile_raises_with_log_and_destroys():
    c, rtc = _compiler("hiprtc", "Code", bytearray, fail=True)
    with pytest.raises(DeviceError, match="failed to compile k.hip for gfx1.*\n.*note"):
        c.compile("src", "k.hip", arch="gfx1")
    assert rtc.calls[-1] == ("destroy",)


def test_check_and_module():
    assert check((0,), "f") is None and check((0, 7), "f") == 7 and check((0, 1, 2), "f") == (1, 2)
    assert check(0, "f") is None
    with pytest.raises(DeviceError, match=r"cuX failed: .*\(3\)"):
        check((3, None), "cuX")
    looked = []
    m = Module("h", lambda h, n: (looked.append(n), (0, f"fn:{n.decode()}"))[1], "getFn")
    assert m.function("k") == "fn:k" and m.function("k") == "fn:k" and looked == [b"k"]
    with pytest.raises(DeviceError, match=r"getFn\(bad\)"):
        Module("h", lambda h, n: (1, None), "getFn").function("bad")
