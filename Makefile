# Thin wrapper over CMake: `make run` and `make test` do all the set-up on a fresh machine.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# nvcc lives outside the default PATH on Debian's CUDA toolkit layout.
MAKEFLAGS += --no-print-directory
export PATH := $(PATH):/usr/local/cuda/bin

.PHONY: all setup configure build run test clean

all: build

setup:
	@scripts/setup.sh

configure: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@scripts/run.sh $(BUILD)

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD)
