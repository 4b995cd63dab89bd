# sandboxd: `make run` serves on the embedded defaults; `make test` runs every test.
GO       ?= go
BIN      := bin
SOCKET   ?= /run/sandboxd/sandboxd.sock
STATEDIR ?= /var/lib/sandboxd
# CI runs as root: root-only tests must run there, never skip.
TESTENV  := $(if $(filter 0,$(shell id -u)),SANDBOXD_REQUIRE_ROOT=1,)

.PHONY: deps build run test vet fuzz fuzz-short bench bench-smoke load clean

deps:
	@scripts/deps.sh

build: deps
	$(GO) build -o $(BIN)/sandboxd ./cmd/sandboxd
	$(GO) build -o $(BIN)/sbctl ./cmd/sbctl
	$(GO) build -o $(BIN)/sbctl-full ./cmd/sbctl/full

run: build
	$(BIN)/sandboxd --socket $(SOCKET) --state-dir $(STATEDIR)

vet: deps
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

test: deps vet
	$(TESTENV) $(GO) test -race -count=1 -timeout 15m ./...
	$(MAKE) --no-print-directory bench-smoke
	$(MAKE) --no-print-directory fuzz-short
	$(MAKE) --no-print-directory load

# Every benchmark once, so one that broke (its setup no longer valid for the code) fails CI
# rather than the next measurement: BenchmarkSpawn's confined runs did, unnoticed, when the
# plan began to skip dirs the caller cannot reach.
bench-smoke:
	$(TESTENV) $(GO) test -run '^$$' -bench . -benchtime 1x -count=1 ./...
	$(GO) run ./cmd/sbbench -only hook -quick

# A mixed load against a fresh daemon, with its checks: every request answered, audit
# verified, one call.end per executed call, nothing left in the cgroups, RSS bounded.
load:
	$(GO) run ./cmd/sbbench load -clients 16 -calls 40

# Each fuzz target briefly in CI, for a number of executions (about 4 s each here) rather
# than a duration: Go 1.26's fuzz coordinator can fail a duration run at its deadline with a
# bare "context deadline exceeded" and no failing input (go.dev/issue/75804, fixed in 1.27).
# `make fuzz FUZZTIME=5m` runs each for a duration instead; under 1.26 a failure there that
# wrote no file to testdata/fuzz is that race, not a finding.
FUZZ_TARGETS := \
	./classifier:FuzzClassify:25000 \
	./classifier:FuzzClassifyDialects:15000 \
	./classifier:FuzzSimpleCommand:10000 \
	./permission:FuzzParseRule:10000 \
	./internal/subid:FuzzParse:5000 \
	./permission:FuzzMatchWeb:20000 \
	./permission:FuzzMatchBashGlobs:50000 \
	./api:FuzzDecodeRequest:20000 \
	./api:FuzzWriteResult:3000 \
	./audit:FuzzCanonical:100000 \
	./audit:FuzzAppendBody:100000 \
	./audit:FuzzRedactFastPath:20000 \
	./audit:FuzzRedactCommand:20000 \
	./audit:FuzzInputDigest:30000 \
	./egress:FuzzParseRequest:20000 \
	./egress:FuzzParseInner:20000 \
	./egress:FuzzOpenStream:20000 \
	./egress:FuzzUpstreamAnswer:1500 \
	./worker:FuzzClientFrames:20000 \
	./worker:FuzzMatchGlob:20000 \
	./cmd/sbctl/internal/mcpserver:FuzzScreenLine:20000 \
	./executor:FuzzSedInPlace:20000 \
	./executor:FuzzUnifiedDiff:20000 \
	./sandbox:FuzzMountinfo:20000 \
	./sandbox:FuzzSafeGitConfig:20000 \
	./sandbox:FuzzIndexGitlinks:20000 \
	./sandbox:FuzzShellNames:20000 \
	./sandbox:FuzzAgentNames:20000 \
	./sandbox:FuzzSSHNames:20000 \
	./sandbox:FuzzVimNames:20000 \
	./sandbox:FuzzRCNames:20000 \
	./sandbox:FuzzToolConfigNames:20000 \
	./internal/globwalk:FuzzLoosen:20000 \
	./replay:FuzzDecide:10000

fuzz-short:
	@$(MAKE) --no-print-directory fuzz

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$(if $(FUZZTIME),$(FUZZTIME),$${rest##*:}x); \
		echo "fuzz $$pkg $$name ($$budget)"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $$budget $$pkg || exit 1; \
	done

bench: build
	$(GO) run ./cmd/sbbench

clean:
	rm -rf $(BIN)

# Install: binaries, units, tmpfiles/sysusers snippets, docs, and the example config (never
# over an existing one). PREFIX=/usr for a distribution; /usr/local/lib/systemd/system and
# its tmpfiles.d/sysusers.d siblings are on systemd's search path too. DESTDIR stages.
PREFIX     ?= /usr/local
SYSCONFDIR ?= /etc
BINDIR     := $(PREFIX)/bin
UNITDIR    := $(PREFIX)/lib/systemd/system
DOCDIR     := $(PREFIX)/share/doc/sandboxd

.PHONY: install deb

install: build
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(PREFIX)/lib/tmpfiles.d \
		$(DESTDIR)$(PREFIX)/lib/sysusers.d $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(SYSCONFDIR)/sandboxd/policy.d
	install -m 0755 $(BIN)/sandboxd $(BIN)/sbctl $(BIN)/sbctl-full $(DESTDIR)$(BINDIR)/
# The units name /usr/bin/sandboxd and /usr/share/doc/sandboxd; another PREFIX gets its own.
	sed -e 's#/usr/bin/sandboxd#$(BINDIR)/sandboxd#' -e 's#/usr/share/doc/sandboxd#$(DOCDIR)#g' \
		systemd/sandboxd.service > $(DESTDIR)$(UNITDIR)/sandboxd.service
	sed 's#/usr/share/doc/sandboxd#$(DOCDIR)#g' systemd/sandboxd.socket > $(DESTDIR)$(UNITDIR)/sandboxd.socket
	chmod 0644 $(DESTDIR)$(UNITDIR)/sandboxd.service $(DESTDIR)$(UNITDIR)/sandboxd.socket
	install -m 0644 systemd/sandboxd.tmpfiles.conf $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/sandboxd.conf
	install -m 0644 systemd/sandboxd.sysusers.conf $(DESTDIR)$(PREFIX)/lib/sysusers.d/sandboxd.conf
# Every page, laid out as in the tree: README links docs/*.md and the pages link each other.
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/
	install -m 0644 docs/*.md $(DESTDIR)$(DOCDIR)/docs/
	install -m 0644 systemd/sandboxd.yaml $(DESTDIR)$(DOCDIR)/sandboxd.yaml.example
# An admin's edited config is never overwritten.
	[ -e $(DESTDIR)$(SYSCONFDIR)/sandboxd/sandboxd.yaml ] || \
		install -m 0644 systemd/sandboxd.yaml $(DESTDIR)$(SYSCONFDIR)/sandboxd/sandboxd.yaml

# A Debian package of `make install PREFIX=/usr`, built with dpkg-deb (files owned by root).
DEB_VERSION ?= $(shell sed -n 's/^var Version = "\(.*\)"/\1/p' daemon/core.go)
DEB_ARCH    ?= $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_STAGE   := $(BIN)/deb
DEB_FILE    := $(BIN)/sandboxd_$(DEB_VERSION)_$(DEB_ARCH).deb

deb: build
	rm -rf $(DEB_STAGE)
	$(MAKE) --no-print-directory install DESTDIR=$(abspath $(DEB_STAGE)) PREFIX=/usr
	install -d $(DEB_STAGE)/DEBIAN
	sed -e 's/@VERSION@/$(DEB_VERSION)/' -e 's/@ARCH@/$(DEB_ARCH)/' \
		-e "s/@SIZE@/$$(du -sk --exclude=DEBIAN $(DEB_STAGE) | cut -f1)/" \
		systemd/deb/control.in > $(DEB_STAGE)/DEBIAN/control
	install -m 0644 systemd/deb/conffiles $(DEB_STAGE)/DEBIAN/conffiles
	install -m 0755 systemd/deb/postinst systemd/deb/prerm systemd/deb/postrm $(DEB_STAGE)/DEBIAN/
	dpkg-deb --root-owner-group -Zxz --build $(DEB_STAGE) $(DEB_FILE)
	@echo "built $(DEB_FILE)"
