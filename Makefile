# Hydra — make targets. `make test` and `make run` install the system
# libraries they need (Debian packages) when they are missing.
SWIFT ?= swift
DEPS_PKGCONFIG := libuv libcurl sqlite3 zlib libtcmalloc_minimal
DEPS_APT := libuv1-dev libcurl4-openssl-dev libsqlite3-dev zlib1g-dev libgoogle-perftools-dev pkg-config python3 tinyproxy openssl nghttp2-server

.PHONY: deps build release run demo test test-tsan test-asan fuzz soak bench clean

deps:
	@if ! pkg-config --exists $(DEPS_PKGCONFIG) 2>/dev/null || ! command -v python3 >/dev/null \
		|| ! test -x /usr/bin/tinyproxy || ! command -v openssl >/dev/null || ! test -x /usr/sbin/nghttpd; then \
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

# The C of CSQLiteWAL with every warning an error (SwiftPM builds it with
# its own flags: unsafe flags in Package.swift would bar embedders).
CLANG ?= $(shell command -v clang || command -v cc)
test: deps
	$(CLANG) -std=c11 -Wall -Wextra -Werror -fsyntax-only -ISources/CSQLiteWAL/include Sources/CSQLiteWAL/*.c
	$(SWIFT) build --build-tests
	SWIFT=$(SWIFT) bash Tests/Support/in-temporary-folder.sh bash Tests/Support/run-tests.sh

# The engine and server suites under ThreadSanitizer / AddressSanitizer, each
# in its own build folder; the servers the tests start are the sanitized ones.
# A report fails the run (halt_on_error), in the test process or a server.
SANITIZED_TESTS ?= .
test-tsan: deps
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build-tsan -Xswiftc -DHYDRA_TSAN
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" bash Tests/Support/in-temporary-folder.sh \
		$(SWIFT) test --skip-build --sanitize=thread --scratch-path .build-tsan -Xswiftc -DHYDRA_TSAN --filter '$(SANITIZED_TESTS)'

test-asan: deps
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build-asan
	ASAN_OPTIONS="halt_on_error=1 detect_leaks=0" bash Tests/Support/in-temporary-folder.sh \
		$(SWIFT) test --skip-build --sanitize=address --scratch-path .build-asan --filter '$(SANITIZED_TESTS)'

# libFuzzer on each target for FUZZ_SECONDS (default 60) from the seed
# corpora in Fuzz/corpus; what it learns stays in .build-fuzz/corpus, what it
# finds is written to Fuzz/findings (commit it into Fuzz/corpus once fixed).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= json spec config rpc
fuzz: deps
	$(SWIFT) build -c release --product hydra-fuzz --scratch-path .build-fuzz \
		-Xswiftc -sanitize=fuzzer,address -Xswiftc -DHYDRA_FUZZ -Xswiftc -use-ld=lld
	@mkdir -p Fuzz/findings
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p .build-fuzz/corpus/$$t; \
		echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
		HYDRA_FUZZ_TARGET=$$t .build-fuzz/release/hydra-fuzz .build-fuzz/corpus/$$t Fuzz/corpus/$$t \
			-max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
			-artifact_prefix=Fuzz/findings/$$t- -print_final_stats=1 > .build-fuzz/$$t.log 2>&1; \
		status=$$?; \
		grep -E "^(stat::(number_of_executed_units|average_exec_per_sec|new_units_added)|SUMMARY|==[0-9]+==ERROR)" .build-fuzz/$$t.log; \
		if [ $$status -ne 0 ]; then echo "fuzz: $$t: finding saved in Fuzz/findings (log .build-fuzz/$$t.log)"; exit 1; fi; \
	done

# 30 minutes of mixed load with a kill -9 every 5 minutes (SOAK_SECONDS,
# SOAK_KILL_EVERY); prints the server's RSS/fd curve, writes soak-curve.csv.
soak: release
	python3 Benchmarks/soak.py

bench: deps
	bash Benchmarks/run.sh

clean:
	rm -rf .build .build-tsan .build-asan .build-fuzz
