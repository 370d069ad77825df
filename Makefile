# Hydra — make targets. `make test` and `make run` install the system
# libraries they need (Debian packages) when they are missing.
SWIFT ?= swift
DEPS_PKGCONFIG := libuv libcurl sqlite3 zlib
DEPS_APT := libuv1-dev libcurl4-openssl-dev libsqlite3-dev zlib1g-dev pkg-config python3

.PHONY: deps build release run demo test bench clean

deps:
	@if ! pkg-config --exists $(DEPS_PKGCONFIG) 2>/dev/null || ! command -v python3 >/dev/null; then \
		echo "installing $(DEPS_APT)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEPS_APT); \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --product hydra

# The main job: the server with the documented default config (JSON-RPC on
# 127.0.0.1:7400, state in ./var). Submit from a second terminal:
#   .build/release/hydra submit jobs/demo.json --follow
run: release
	.build/release/hydra serve --config config/hydra.json

# One job spec in-process, no server.
demo: release
	.build/release/hydra run jobs/demo.json --config config/hydra.json

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

bench: deps
	bash Benchmarks/run.sh

clean:
	rm -rf .build
