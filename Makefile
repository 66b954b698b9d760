# The README's commands.  `make run` installs missing Debian packages, builds
# a release build and runs the default workload; `make test` builds and runs
# every test: ctest (C), pytest (harness, CLI) and the browser checks.
#   make test IPU_SANITIZE=ON   the same under ASan+UBSan (build-sanitize/)
#   make test CC=clang          the same built with clang (build-clang/)
#   make coverage               instrumented build, all tests, coverage per part (fails under 95% lines, 85% branches)
#   make coverage-random        the same build, only the random workloads: what they reach
#   make fuzz FUZZ_SECONDS=N    libFuzzer targets built with clang (build-fuzz/), N s each
#   make deps-models            torch and torchvision, for exporting models (the nightly's model case)
PYTHON ?= /usr/bin/python3
JOBS ?= $(shell nproc)
IPU_SANITIZE ?= OFF
# A compiler given on the command line (make test CC=clang) builds in a
# folder of its own (build-clang), so the default build stays as it is.
ifeq ($(origin CC),command line)
COMPILER_SUFFIX := -$(notdir $(CC))
CMAKE_COMPILER := -DCMAKE_C_COMPILER=$(CC)
endif
DEB_PACKAGES = cmake gcc make pkg-config libjansson-dev libopenblas-dev libcmocka-dev zlib1g-dev \
	python3-pytest python3-selenium python3-numpy chromium chromium-driver gcovr parallel openssh-server \
	python3-onnx libonnx-testdata python3-hypothesis

ifeq ($(IPU_SANITIZE),ON)
BUILD_DIR ?= build-sanitize$(COMPILER_SUFFIX)
BUILD_TYPE ?= RelWithDebInfo
ASAN_RUNTIME := $(shell gcc -print-file-name=libasan.so)
UBSAN_RUNTIME := $(shell gcc -print-file-name=libubsan.so)
# The C tests run with LeakSanitizer.  Python is not instrumented: preload
# the runtimes for ctypes, ignore leaks of the interpreter itself.
TEST_ENV_C = ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
TEST_ENV = LD_PRELOAD="$(ASAN_RUNTIME) $(UBSAN_RUNTIME)" ASAN_OPTIONS=detect_leaks=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
else
BUILD_DIR ?= build$(COMPILER_SUFFIX)
BUILD_TYPE ?= Release
TEST_ENV_C =
TEST_ENV =
endif

export IPU_E2E_LIBRARY = $(CURDIR)/$(BUILD_DIR)/libipu_e2e.so

FUZZ_SECONDS ?= 60
FUZZ_BUILD_DIR ?= build-fuzz

.PHONY: all deps deps-models build run test test-c test-python coverage coverage-random fuzz clean

all: build

deps:
	@missing=$$(for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing missing Debian packages:" $$missing; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$missing; \
	fi

# Large (about 1 GB installed): only exporting models needs them, not make test.
deps-models:
	@$(MAKE) deps DEB_PACKAGES="python3-torch python3-torchvision"

$(BUILD_DIR)/Makefile: CMakeLists.txt
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DIPU_SANITIZE=$(IPU_SANITIZE) \
		$(CMAKE_COMPILER) $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/Makefile
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	harness/bin/ipu-e2e-test --workload mlp --reference-run --reference-fp32

test-c: build
	cd $(BUILD_DIR) && $(TEST_ENV_C) ctest --output-on-failure -j $(JOBS)

test-python: build
	$(TEST_ENV) $(PYTHON) -m pytest -q harness/tests

test: test-c test-python

# The figures asked of make coverage (it fails below them).
COVERAGE_LINES ?= 95
COVERAGE_BRANCHES ?= 85
coverage:
	$(MAKE) test BUILD_DIR=build-coverage BUILD_TYPE=Debug CMAKE_FLAGS=-DIPU_COVERAGE=ON
	gcovr --root . --object-directory build-coverage --exclude 'engine/tests/.*' \
		--json build-coverage/coverage.json build-coverage
	PYTHONPATH=harness $(PYTHON) -m ipu_e2e.coverage_summary build-coverage/coverage.json \
		--fail-under-line $(COVERAGE_LINES) --fail-under-branch $(COVERAGE_BRANCHES)

# Which compiler paths the random workloads reach on their own: the counters
# are zeroed, then only ipu-e2e-random runs (make test's seeds and the kept
# cases); the table lists every engine file with the lines never reached.
COVERAGE_SEEDS ?= 0-199
coverage-random:
	$(MAKE) build BUILD_DIR=build-coverage BUILD_TYPE=Debug CMAKE_FLAGS=-DIPU_COVERAGE=ON
	find build-coverage -name '*.gcda' -delete
	IPU_E2E_LIBRARY=$(CURDIR)/build-coverage/libipu_e2e.so $(PYTHON) harness/bin/ipu-e2e-random \
		--seeds $(COVERAGE_SEEDS) --regressions --jobs $(JOBS)
	gcovr --root . --object-directory build-coverage --filter 'engine/src/' --print-summary \
		--txt build-coverage/random-coverage.txt build-coverage
	cat build-coverage/random-coverage.txt

# Fuzz targets (engine/tests/fuzz/): clang with libFuzzer, ASan and UBSan.
fuzz:
	$(PYTHON) harness/bin/ipu-e2e-fuzz --seconds $(FUZZ_SECONDS) --build-dir $(FUZZ_BUILD_DIR) --jobs $(JOBS)

clean:
	rm -rf build build-sanitize build-coverage build-clang build-alloc build-alloc-sanitize build-alloc-clang build-fuzz build-fuzzcheck
