"""The offline AMD compiler of ``make check-amd``: HIP sources -> amdgcn code objects, the way
hiprtc builds them, with Debian's LLVM 19 and ROCm device libraries (no GPU, no ROCm install).

hiprtc (ROCm's ``hipamd/src/hiprtc``) compiles a program as ``clang -x hip`` for the device only
with its own options first - ``-O3 --hip-version=... -DHIP_VERSION_* -D__HIPCC_RTC__ -include
hiprtc_runtime.h -std=c++14 -nogpuinc -Wno-gnu-line-marker -Wno-missing-prototypes`` - then the
caller's options (:func:`hipdnn_cabi.device.hip.hiprtc_options` plus the step's own), links the
device libraries (ocml / ockl / oclc_*) and makes an executable code object.  ``hiprtc_runtime.h``
is hiprtc's built-in header: the preprocessed HIP device API that every hiprtc program sees
(``threadIdx``, ``__syncthreads``, ``__shfl_xor``, math, vector types); it is read here from
``libhiprtc-builtins.so`` (symbol ``__hipRTC_header``), the same bytes ROCm's hiprtc embeds.

Packages (Debian 12): ``clang-19 lld-19 llvm-19 rocm-device-libs libhiprtc-builtins5``
(:func:`install` runs apt-get for the missing ones).  The device libraries are ROCm 5.2.3
(LLVM 15 bitcode, which clang 19 links) and stop at gfx940: gfx942 gets an
``oclc_isa_version_942.bc`` made from the gfx940 one (the ISA version constant 9400 -> 9402) in a
folder of links to the rest.

:class:`Toolchain` prepares that folder and the header under a cache directory once;
:meth:`Toolchain.compile` has the run-time compilers' signature (source, name, options, arch,
headers) -> code object bytes, so it can stand in for hiprtc in tests.
"""
from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

LLVM = "19"
PACKAGES = ("clang-19", "lld-19", "llvm-19", "rocm-device-libs", "libhiprtc-builtins5")
DEVLIB_DIRS = ("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", "/usr/lib/amdgcn/bitcode",
               "/opt/rocm/amdgcn/bitcode")
BUILTINS_LIBS = ("/usr/lib/x86_64-linux-gnu/libhiprtc-builtins.so.5",
                 "/usr/lib/x86_64-linux-gnu/libhiprtc-builtins.so")
HIP_VERSION = (5, 2, 3)          # the hiprtc whose built-in header is used
EM_AMDGPU = 224


class ToolchainMissing(RuntimeError):
    pass


def hiprtc_internal_options(version=HIP_VERSION):
    """What hiprtc puts before the caller's options (ROCm clr, hiprtcInternal.cpp)."""
    ma, mi, pa = version
    return ["-O3", f"--hip-version={ma}.{mi}.{pa}", f"-DHIP_VERSION_MAJOR={ma}",
            f"-DHIP_VERSION_MINOR={mi}", f"-DHIP_VERSION_PATCH={pa}", "-D__HIPCC_RTC__",
            "-include", "hiprtc_runtime.h", "-std=c++14", "-nogpuinc", "-Wno-gnu-line-marker",
            "-Wno-missing-prototypes"]


def _tool(name):
    return shutil.which(f"{name}-{LLVM}") or (shutil.which(name) if name != "clang" else None) \
        or (os.path.exists(f"/usr/lib/llvm-{LLVM}/bin/{name}") and f"/usr/lib/llvm-{LLVM}/bin/{name}") \
        or None


def _devlib_dir():
    for d in DEVLIB_DIRS:
        if os.path.exists(os.path.join(d, "ocml.bc")):
            return d
    return None


def _builtins_lib():
    for p in BUILTINS_LIBS:
        if os.path.exists(p):
            return p
    return None


def missing():
    """The packages whose files are not here."""
    need = []
    if not _tool("clang"):
        need.append("clang-19")
    if not (_tool("ld.lld") or shutil.which(f"ld.lld-{LLVM}")):
        need.append("lld-19")
    if not (_tool("llvm-objdump") and _tool("llvm-readelf") and _tool("llvm-dis") and _tool("llvm-as")):
        need.append("llvm-19")
    if not _devlib_dir():
        need.append("rocm-device-libs")
    if not _builtins_lib():
        need.append("libhiprtc-builtins5")
    return need


def install(log=print):
    """apt-get install the missing packages (root); raises ToolchainMissing when that fails."""
    need = missing()
    if not need:
        return
    apt = shutil.which("apt-get")
    if apt is None:
        raise ToolchainMissing(f"missing {' '.join(need)} and no apt-get here")
    sudo = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else [])
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    log(f"check-amd: apt-get install {' '.join(need)}")
    cmd = sudo + [apt, "install", "-y", "-q", "--no-install-recommends"] + need
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:      # stale package lists: update once and retry
        subprocess.run(sudo + [apt, "update", "-q"], env=env, capture_output=True, text=True)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0 or missing():
        raise ToolchainMissing(f"apt-get install {' '.join(need)} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")


def _read_builtin_header(lib):
    h = ctypes.CDLL(lib)
    n = ctypes.c_size_t.in_dll(h, "__hipRTC_header_size").value
    return bytes((ctypes.c_char * n).in_dll(h, "__hipRTC_header"))


class Toolchain:
    """clang 19 + the device libraries + hiprtc's header, prepared under ``cache``."""

    def __init__(self, cache):
        need = missing()
        if need:
            raise ToolchainMissing("missing packages: " + " ".join(need))
        self.clang = _tool("clang")
        self.objdump = _tool("llvm-objdump")
        self.readelf = _tool("llvm-readelf")
        self.cache = os.path.abspath(cache)
        os.makedirs(self.cache, exist_ok=True)
        self.devlibs = self._devlibs(_devlib_dir(), _tool("llvm-dis"), _tool("llvm-as"))
        self.incdir = self._header(_builtins_lib())
        v = subprocess.run([self.clang, "--version"], capture_output=True, text=True).stdout
        self.version = v.splitlines()[0].strip() if v else "clang-19"
        h = hashlib.sha256(self.version.encode())
        for f in sorted(os.listdir(self.devlibs)):
            h.update(f.encode())
            h.update(str(os.path.getsize(os.path.join(self.devlibs, f))).encode())
        h.update(open(os.path.join(self.incdir, "hiprtc_runtime.h"), "rb").read())
        self.identity = h.hexdigest()[:16]      # part of every compile's cache key

    def _devlibs(self, src, dis, as_):
        d = os.path.join(self.cache, f"devlibs-{hashlib.sha256(src.encode()).hexdigest()[:8]}")
        if os.path.exists(os.path.join(d, "oclc_isa_version_942.bc")):
            return d
        tmp = d + f".tmp{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        for f in glob.glob(os.path.join(src, "*.bc")):
            os.symlink(f, os.path.join(tmp, os.path.basename(f)))
        if not os.path.exists(os.path.join(src, "oclc_isa_version_942.bc")):
            ll = subprocess.run([dis, os.path.join(src, "oclc_isa_version_940.bc"), "-o", "-"],
                                capture_output=True, text=True, check=True).stdout
            ll2 = ll.replace("i32 9400", "i32 9402")
            assert ll2 != ll, "oclc_isa_version_940.bc: no ISA version constant 9400"
            subprocess.run([as_, "-o", os.path.join(tmp, "oclc_isa_version_942.bc")], input=ll2,
                           text=True, check=True)
        try:
            os.replace(tmp, d)
        except OSError:          # another process made it first
            shutil.rmtree(tmp, ignore_errors=True)
        return d

    def _header(self, lib):
        d = os.path.join(self.cache, "hiprtc-include")
        p = os.path.join(d, "hiprtc_runtime.h")
        if not os.path.exists(p):
            os.makedirs(d, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=d)
            with os.fdopen(fd, "wb") as f:
                f.write(_read_builtin_header(lib))
            os.replace(tmp, p)
        return d

    def argv(self, arch, options=()):
        """The clang command line (less the input, output and include folder) for one
        program: hiprtc's options, then the engine's (hip.hiprtc_options) and the step's."""
        from hipdnn_cabi.device.hip import hiprtc_options
        return self.hiprtc_argv(hiprtc_options(arch) + list(options))

    def hiprtc_argv(self, caller_options):
        """What hiprtcCompileProgram runs for ``caller_options`` (the option list a caller hands
        it, ``--offload-arch`` included): the driver, hiprtc's own options, the caller's."""
        return ([self.clang, "-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output",
                 f"--rocm-device-lib-path={self.devlibs}", f"-I{self.incdir}"]
                + hiprtc_internal_options() + list(caller_options))

    def compile(self, source, name="kernel.hip", options=(), arch="gfx942", headers=None):
        """Source -> code object bytes (raises RuntimeError with clang's messages)."""
        from hipdnn_cabi.device.hip import hiprtc_options
        return self.compile_hiprtc(source, name, hiprtc_options(arch) + list(options), headers)

    def compile_hiprtc(self, source, name, caller_options, headers=None):
        """As hiprtc compiles a program created with ``headers`` for ``caller_options``."""
        arch = next((o.split("=", 1)[1] for o in caller_options if o.startswith("--offload-arch=")), "?")
        with tempfile.TemporaryDirectory(prefix="hdn_amd_") as td:
            for k, v in (headers or {}).items():
                p = os.path.join(td, k)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "w") as f:
                    f.write(v)
            src = os.path.join(td, os.path.basename(name) or "kernel.hip")
            with open(src, "w") as f:
                f.write(source)
            out = os.path.join(td, "out.co")
            r = subprocess.run(self.hiprtc_argv(caller_options) + [f"-I{td}", src, "-o", out],
                               capture_output=True, text=True, cwd=td)
            self.last_log = r.stderr
            if r.returncode != 0 or not os.path.exists(out):
                raise RuntimeError(f"clang failed to compile {name} for {arch}:\n{r.stderr}")
            with open(out, "rb") as f:
                return f.read()

    # ------------------------------------------------------------------ inspection
    def metadata(self, path):
        """Per-kernel metadata from the NT_AMDGPU_METADATA note, and the target."""
        txt = subprocess.run([self.readelf, "--notes", path], capture_output=True, text=True,
                             check=True).stdout
        return parse_metadata(txt)

    def isa_counts(self, path):
        """{kernel: {mnemonic: count}} of the MFMA and the scratch / buffer memory instructions."""
        txt = subprocess.run([self.objdump, "-d", "--no-show-raw-insn", path],
                             capture_output=True, text=True, check=True).stdout
        out, cur = {}, None
        for line in txt.splitlines():
            m = re.match(r"^[0-9a-f]+ <([^>]+)>:", line)
            if m:
                cur = out.setdefault(m.group(1), {})
                continue
            m = re.match(r"^\s+(v_mfma\w*|scratch_\w+|buffer_\w+)", line)
            if m and cur is not None:
                cur[m.group(1)] = cur.get(m.group(1), 0) + 1
        return {k: v for k, v in out.items() if v}


def parse_metadata(txt):
    """``llvm-readelf --notes`` text -> {"target": ..., "kernels": {name: {field: value}}}."""
    out = {"target": None, "kernels": {}}
    m = re.search(r"amdhsa\.target:\s+(\S+)", txt)
    if m:
        out["target"] = m.group(1).strip("'\"")
    cur = None
    for line in txt.splitlines():
        m = re.match(r"^  - \.(\w+):\s*(.*)$", line)
        if m:                                   # a new kernel's first field
            cur = {}
            out.setdefault("_list", []).append(cur)
            cur[m.group(1)] = m.group(2).strip()
            continue
        m = re.match(r"^    \.(\w+):\s*(.*)$", line)
        if m and cur is not None:
            cur[m.group(1)] = m.group(2).strip()
        elif re.match(r"^\S", line):
            cur = None
    for k in out.pop("_list", []):
        if "name" in k:
            out["kernels"][k["name"]] = {f: (int(v) if re.fullmatch(r"-?\d+", v) else v)
                                         for f, v in k.items() if v}
    return out


def elf_symbols(img: bytes):
    """(e_machine, {symbol name: (type, section index)}) of an ELF64 image (.symtab and
    .dynsym); raises ValueError for anything that is not one."""
    if len(img) < 64 or img[:4] != b"\x7fELF" or img[4] != 2 or img[5] != 1:
        raise ValueError("not a little-endian ELF64 image")
    e_machine = struct.unpack_from("<H", img, 18)[0]
    e_shoff = struct.unpack_from("<Q", img, 40)[0]
    e_shentsize, e_shnum = struct.unpack_from("<HH", img, 58)
    secs = []
    for i in range(e_shnum):
        o = e_shoff + i * e_shentsize
        name, typ, flags, addr, off, size, link, info, align, entsize = \
            struct.unpack_from("<IIQQQQIIQQ", img, o)
        secs.append((typ, off, size, link, entsize))
    syms = {}
    for typ, off, size, link, entsize in secs:
        if typ not in (2, 11) or not entsize:        # SHT_SYMTAB, SHT_DYNSYM
            continue
        stroff = secs[link][1]
        for j in range(size // entsize):
            st_name, st_info, st_other, st_shndx, st_value, st_size = \
                struct.unpack_from("<IBBHQQ", img, off + j * entsize)
            end = img.index(b"\0", stroff + st_name)
            nm = img[stroff + st_name:end].decode("utf-8", "replace")
            if nm:
                syms[nm] = (st_info & 15, st_shndx)
    return e_machine, syms


# ELF e_flags & 0xff (EF_AMDGPU_MACH) of the targets
AMDGPU_MACH = {0x3f: "gfx90a", 0x4c: "gfx942"}


def code_object_target(img: bytes):
    """The gfx target an amdgcn code object was built for (None if not one we know)."""
    mach, _ = elf_symbols(img)
    if mach != EM_AMDGPU:
        return None
    return AMDGPU_MACH.get(struct.unpack_from("<I", img, 48)[0] & 0xff)


def kernels_defined(img: bytes):
    """The kernels an amdgcn code object defines: FUNC symbols with a kernel descriptor."""
    mach, syms = elf_symbols(img)
    if mach != EM_AMDGPU:
        raise ValueError(f"ELF machine {mach}, not AMDGPU ({EM_AMDGPU})")
    return sorted(n for n, (t, sh) in syms.items()
                  if t == 2 and sh != 0 and (n + ".kd") in syms and syms[n + ".kd"][1] != 0)
