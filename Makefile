# efax — build and tests. `make` builds every driver into build/ (CUDA ones too when nvcc is
# found); `make test` runs the test suite; `make asan` runs it with AddressSanitizer+UBSan.
# Each target first makes sure the system packages are there (tests/deps.sh; EFAX_SKIP_DEPS=1
# skips that). EFAX_DEFS adds defines (e.g. -DEFAX_NO_PMIX); PKG_CFLAGS/PKG_LIBS/NV_LIBS can be
# given for a libfabric outside pkg-config's view.
#
# Another libfabric: LIBFABRIC=PREFIX (an install prefix with lib/pkgconfig/libfabric.pc, e.g.
# /opt/amazon/efa or what tests/libfabric.sh builds). Everything then builds against it into
# build/lf-<prefix name>/ with PREFIX/lib as the run path, and `make test LIBFABRIC=PREFIX` runs
# the whole suite on it.

CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Wpedantic -Werror
LIBFABRIC ?=
ifneq ($(LIBFABRIC),)
LF_PC := $(firstword $(wildcard $(LIBFABRIC)/lib/pkgconfig/libfabric.pc $(LIBFABRIC)/lib64/pkgconfig/libfabric.pc))
ifeq ($(LF_PC),)
$(error LIBFABRIC=$(LIBFABRIC): no lib/pkgconfig/libfabric.pc there; give the prefix libfabric was installed to (e.g. /opt/amazon/efa), or build one with tests/libfabric.sh TARBALL)
endif
LF_LIBDIR := $(patsubst %/pkgconfig/libfabric.pc,%,$(LF_PC))
export PKG_CONFIG_PATH := $(dir $(LF_PC))$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
export LD_LIBRARY_PATH := $(LF_LIBDIR)$(if $(LD_LIBRARY_PATH),:$(LD_LIBRARY_PATH))
export PATH := $(LIBFABRIC)/bin:$(PATH)
LF_RPATH := -Wl,-rpath,$(LF_LIBDIR)
B ?= build/lf-$(notdir $(patsubst %/,%,$(LIBFABRIC)))
endif
# evaluated when used, so that packages installed by the deps step are seen
# ($(shell) does not see exported variables before make 4.4: name the path on the command)
PKG_CFLAGS = $(shell PKG_CONFIG_PATH="$(PKG_CONFIG_PATH)" pkg-config --cflags libfabric pmix)
PKG_LIBS   = $(shell PKG_CONFIG_PATH="$(PKG_CONFIG_PATH)" pkg-config --libs libfabric pmix) $(LF_RPATH)
# nvcc takes linker flags as -Xlinker, not -Wl,
NV_LIBS    = $(shell echo "$(PKG_LIBS)" | sed 's/-Wl,/-Xlinker /g; s/,/ -Xlinker /g')
NVCC    ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
NVFLAGS ?= -O2 -g -arch=sm_90 -Xcompiler -Wall,-Wextra -Werror all-warnings
CUDA_LIBS := -ldl

DRIVERS      := info doctor rails bootstrap pingpong sendrecv write all2all incast stream kvcache
TESTS        := unit xfer_test any_memory instr_idle arrivals peers defaults
CUDA_DRIVERS := sendrecv_cuda write_cuda all2all_cuda incast_cuda stream_cuda kvcache_cuda doctor_cuda affinity queue proxy ipc
CUDA_TESTS   := cuda_test gpu_share

# B: the build folder (build/asan for the sanitizer build)
B        ?= build
HOST_BIN := $(addprefix $(B)/,$(DRIVERS) $(TESTS))
CUDA_BIN := $(if $(and $(NVCC),$(wildcard efax_cuda.h)),$(addprefix $(B)/,$(CUDA_DRIVERS) $(CUDA_TESTS)))

.PHONY: all host cuda test asan asan-flags soak deps clean headers format
all: host cuda
host: $(HOST_BIN)
cuda: $(CUDA_BIN)

deps:
	@[ -n "$(EFAX_SKIP_DEPS)" ] || tests/deps.sh build

$(B):
	@mkdir -p $(B)

$(B)/%: drivers/%.c efax.h efax_bench.h | deps $(B)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(EFAX_DEFS) -pthread -I. $< -o $@ $(PKG_CFLAGS) $(PKG_LIBS)

$(B)/%: tests/%.c efax.h efax_bench.h | deps $(B)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(EFAX_DEFS) -pthread -I. $< -o $@ $(PKG_CFLAGS) $(PKG_LIBS)

$(B)/%_cuda: drivers/%.c efax.h efax_cuda.h efax_bench.h | deps $(B)
	$(NVCC) $(NVFLAGS) $(EFAX_DEFS) -x cu -I. $< -o $@ $(PKG_CFLAGS) $(NV_LIBS) $(CUDA_LIBS)

$(B)/%: drivers/%.cu efax.h efax_cuda.h efax_bench.h | deps $(B)
	$(NVCC) $(NVFLAGS) $(EFAX_DEFS) -I. $< -o $@ $(PKG_CFLAGS) $(NV_LIBS) $(CUDA_LIBS)

$(B)/%: tests/%.cu efax.h efax_cuda.h efax_bench.h | deps $(B)
	$(NVCC) $(NVFLAGS) $(EFAX_DEFS) -I. $< -o $@ $(PKG_CFLAGS) $(NV_LIBS) $(CUDA_LIBS)

# The test suite: installs what it needs (as root) or says what to install, builds, runs,
# and ends with "N passed, M failed".
test:
	@tests/deps.sh test
	@$(MAKE) --no-print-directory -j$$(nproc) all
	@EFAX_BUILD=$(B) tests/run.sh

# The same suite with every efax binary built under AddressSanitizer and UBSan, into build/asan/
# (with LIBFABRIC=PREFIX: build/asan-lf-<prefix name>/, against that libfabric). Leaks that are
# not efax's are suppressed by tests/lsan.supp, each with its owner. T="PATTERN ..." runs only
# the tests whose names contain one of the patterns (CI runs a subset this way).
ASAN_B     := $(if $(LIBFABRIC),build/asan-lf-$(notdir $(patsubst %/,%,$(LIBFABRIC))),build/asan)
ASAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
# the flags alone, for the suite's own ASan builds (sanitize/asan-ubsan-*), which share build/asan
asan-flags:
	@echo '$(ASAN_FLAGS)'
asan:
	@tests/deps.sh test
	@$(MAKE) --no-print-directory -j$$(nproc) host B=$(ASAN_B) CFLAGS="$(ASAN_FLAGS)"
	@EFAX_SANITIZE=1 EFAX_BUILD=$(ASAN_B) tests/run.sh $(T)

# Every fault family at once (EFAX_FAULTS) for 10 minutes: each driver's checked run on tcp and shm,
# one after another, each with its own seed (tests/soak.sh; SOAK_SECONDS=N for another length).
soak:
	@$(MAKE) --no-print-directory host
	@EFAX_BUILD=$(B) tests/soak.sh

# The layout: .clang-format (clang-format 14) applied to every header, driver and test program;
# tests/run.sh's style/clang-format fails on drift.
format:
	clang-format --style=file -i efax.h efax_cuda.h efax_bench.h drivers/*.c drivers/*.cu tests/*.c

clean:
	rm -rf build
