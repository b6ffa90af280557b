# ctx — build, test, demo, bench. See README.md.
GO      ?= go
export CGO_ENABLED := 0
PKGS    := ./cmd/ctx ./cmd/ctxterm ./cmd/tsh ./cmd/agent.update ./examples/demo-agent
PREFIX  ?= /usr/local

.PHONY: build test test-short test-systemd vet demo bench fuzz clean

build:
	@mkdir -p bin
	$(GO) build -o bin/ $(PKGS)

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

# Every test, with the race detector (needs cgo for -race).
test: build vet
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 40m ./...

test-short: build
	$(GO) test -count=1 -short ./...

# The systemd launcher against a real user manager (systemd-nspawn of a
# cached debootstrap'ed Debian; needs root). See e2e/systemd/run.sh.
test-systemd:
	bash e2e/systemd/run.sh

# The demo: a temp CTX_ROOT, the clock tool, the demo agent, one question.
demo: build
	bash examples/demo.sh

# Benchmarks compare against a baseline in the same run; see README "Performance".
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 20x ./e2e/ ./internal/store/

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseRequest -fuzztime 20s ./ipc/
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 20s ./internal/envelope/
	$(GO) test -run '^$$' -fuzz FuzzParseLine -fuzztime 20s ./internal/envelope/

clean:
	rm -rf bin
