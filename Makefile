# sandboxd: `make run` serves on the embedded defaults; `make test` runs every test.
GO       ?= go
BIN      := bin
SOCKET   ?= /run/sandboxd/sandboxd.sock
STATEDIR ?= /var/lib/sandboxd
# CI runs as root: root-only tests must run there, never skip.
TESTENV  := $(if $(filter 0,$(shell id -u)),SANDBOXD_REQUIRE_ROOT=1,)
FUZZTIME ?= 10s

.PHONY: deps build run test vet fuzz fuzz-short bench load clean

deps:
	@scripts/deps.sh

build: deps
	$(GO) build -o $(BIN)/sandboxd ./cmd/sandboxd
	$(GO) build -o $(BIN)/sbctl ./cmd/sbctl

run: build
	$(BIN)/sandboxd --socket $(SOCKET) --state-dir $(STATEDIR)

vet: deps
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

test: deps vet
	$(TESTENV) $(GO) test -count=1 -timeout 15m ./...
	$(MAKE) --no-print-directory fuzz-short
	$(MAKE) --no-print-directory load

# A mixed load against a fresh daemon, with its checks: every request answered, audit
# verified, one call.end per executed call, nothing left in the cgroups, RSS bounded.
load:
	$(GO) run ./cmd/sbbench load -clients 16 -calls 40

# Each fuzz target briefly in CI; `make fuzz FUZZTIME=5m` for a longer run.
FUZZ_TARGETS := \
	./classifier:FuzzClassify \
	./classifier:FuzzSimpleCommand \
	./permission:FuzzParseRule \
	./api:FuzzDecodeRequest \
	./audit:FuzzCanonical \
	./audit:FuzzAppendBody \
	./audit:FuzzRedactFastPath

fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=5s

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

bench: build
	$(GO) run ./cmd/sbbench

clean:
	rm -rf $(BIN)
