# ctx — build, test, demo, bench. See README.md.
GO      ?= go
export CGO_ENABLED := 0
PKGS    := ./cmd/ctx ./cmd/ctxd ./cmd/ctx-cluster ./cmd/ctxterm ./cmd/tsh ./cmd/agent.update ./cmd/ctxtools ./examples/demo-agent ./examples/fixer-agent
PREFIX  ?= /usr/local

.PHONY: build install test test-short test-systemd test-cluster vet demo bench bench-peers bench-scale fuzz fuzz-keep chaos clean

BINDIR  ?= $(PREFIX)/bin
# A user's own units: systemd searches ~/.local/share/systemd/user
# ($XDG_DATA_HOME), never ~/.local/lib/systemd/user, so a PREFIX under
# $HOME puts them in PREFIX/share/systemd/user.
ifeq ($(patsubst $(HOME)/%,,$(PREFIX)),)
UNITDIR ?= $(PREFIX)/share/systemd/user
else
UNITDIR ?= $(PREFIX)/lib/systemd/user
endif
BASHDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHDIR  ?= $(PREFIX)/share/zsh/site-functions
FISHDIR ?= $(PREFIX)/share/fish/vendor_completions.d

build:
	@mkdir -p bin
	$(GO) build -o bin/ $(PKGS)

# ctxd (the daemon: `ctx daemon` and auto-start exec it), tsh, ctxterm,
# agent.update and ctxtools (the standard toolset) sit beside ctx:
# the daemon and `ctx init` install them into CTX_ROOT from there.
# ctx-cluster (a cluster node, docs/cluster.md) is the only binary that
# links etcd and gRPC; ctx and ctxd never exec it.
install: build
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(BASHDIR) $(DESTDIR)$(ZSHDIR) $(DESTDIR)$(FISHDIR)
	install -m 0755 bin/ctx bin/ctxd bin/ctx-cluster bin/ctxterm bin/tsh bin/agent.update bin/ctxtools agent.sh $(DESTDIR)$(BINDIR)/
	env -u CTX_ROOT -u CTX_RUNTIME_DIR bin/ctx install-units --dir $(DESTDIR)$(UNITDIR) --bin $(BINDIR)/ctx
	bin/ctx completion bash > $(DESTDIR)$(BASHDIR)/ctx
	bin/ctx completion zsh  > $(DESTDIR)$(ZSHDIR)/_ctx
	bin/ctx completion fish > $(DESTDIR)$(FISHDIR)/ctx.fish

# staticcheck is a tool dependency in go.mod (go tool staticcheck): the
# version is pinned and needs nothing installed.
vet:
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

# Every test, with the race detector (needs cgo for -race). scripts/deps.sh
# installs what is missing when run as root, else names the command to run.
test: build vet
	@bash scripts/deps.sh test
	@bash scripts/mcp-servers.sh >/dev/null || echo "make test: the MCP servers are not installed (see above); e2e/mcp_test.go skips the tests that need them"
	@bash scripts/acp-sdk.sh >/dev/null || echo "make test: the ACP TypeScript SDK is not installed (see above); e2e/acp_test.go skips the tests that need it"
	@bash scripts/acp-agents.sh >/dev/null || echo "make test: the ACP agents and acpx are not installed (see above); their e2e tests skip (fail under CI=true)"
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 40m ./...

# The cluster at the issue's scale (docs/cluster.md "Proof"): three
# ctx-cluster nodes, an embedded etcd (cmd/ctx-etcd-test), one shared
# root; 300 sessions, 60 runs in flight at a kill -9, a node paused past
# its TTL, a node restarted, 10 % of request ids resent.
test-cluster: build
	@bash scripts/deps.sh test
	CTX_TEST_CLUSTER=1 $(GO) test -count=1 -timeout 15m -run '^TestClusterScale$$' -v ./e2e/

test-short: build
	$(GO) test -count=1 -short ./...

# The systemd launcher against a real user manager (systemd-nspawn of a
# cached debootstrap'ed Debian; needs root). See e2e/systemd/run.sh.
test-systemd:
	bash e2e/systemd/run.sh

# The demo: a temp CTX_ROOT and git repository with a failing
# test; a scripted agent finds and fixes the bug with the standard tools.
demo: build
	@bash scripts/deps.sh demo
	bash examples/demo.sh

# Benchmarks compare against a baseline in the same run; see docs/performance.md.
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 20x ./e2e/ ./internal/store/ ./internal/review/ ./internal/sandbox/ ./internal/workspace/ ./internal/agentdef/ ./internal/cgroup/ ./internal/workers/

# ctx's tool call against its peers' sandboxes (e2e BenchmarkPeers): installs
# Anthropic's sandbox runtime and Codex, pinned, from the npm registry into
# .cache/peers (and socat, which srt needs). Not part of CI.
PEERS_DIR ?= $(CURDIR)/.cache/peers
SRT_VERSION ?= 0.0.83
CODEX_VERSION ?= 0.171.0
bench-peers: build
	@command -v socat >/dev/null || { apt-get update && apt-get install -y socat; }
	mkdir -p $(PEERS_DIR)
	cd $(PEERS_DIR) && npm install --no-audit --no-fund --no-save @anthropic-ai/sandbox-runtime@$(SRT_VERSION) @openai/codex@$(CODEX_VERSION)
	CTX_BENCH_PEERS=$(PEERS_DIR) $(GO) test -run '^$$' -bench '^BenchmarkPeers$$' -benchtime 20x ./e2e/

# The scale benchmark (e2e TestBenchScale, gated by CTX_BENCH_SCALE):
# SCALE_SESSIONS sessions created then idle → RSS and descriptors after
# passivation, resume passivated vs live, sends/s to 100 concurrent
# sessions vs the minimal launcher. See docs/performance.md.
SCALE_SESSIONS ?= 10000
bench-scale: build
	CTX_BENCH_SCALE=1 CTX_BENCH_SCALE_N=$(SCALE_SESSIONS) $(GO) test -count=1 -timeout 60m -run '^TestBenchScale$$' -v ./e2e/

# Every fuzz target for FUZZTIME each (scripts/fuzz.sh); `make fuzz-keep`
# also commits new-coverage inputs under testdata/fuzz/ for go test to replay.
fuzz:
	GO=$(GO) bash scripts/fuzz.sh

fuzz-keep:
	GO=$(GO) bash scripts/fuzz.sh --keep

# The chaos test's long form (CHAOS_KILLS kills, default
# 1000); `make test` runs its short form (12 kills) with the rest of e2e.
CHAOS_KILLS ?= 1000
chaos: build
	CTX_CHAOS_KILLS=$(CHAOS_KILLS) $(GO) test -count=1 -timeout 180m -run '^TestChaos$$' -v ./e2e/

clean:
	rm -rf bin
