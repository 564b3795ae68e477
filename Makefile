# p2pmsg — the two commands the README starts with:
#   make run    build p2pmsg and run the paper's AMTT experiment on dsl and lan
#   make test   everything CI checks
# Both need only Go, Java and Maven on the machine; the JXSE 2.7 jar is
# fetched from Maven Central by the interop tests themselves.

GO        ?= go
BIN       := bin/p2pmsg
FUZZTIME  ?= 3000x
# How long each fuzz target may minimize a new input it finds: go test's
# default, a minute per input, took the whole run of the targets seeded
# with captured JXTA sessions (jxtatcp FuzzStream, pipe FuzzParsePBPAnswer).
FUZZMINTIME ?= 10x
# Every go test -fuzz target, as package:Target.
FUZZ_PKGS := ./pkg/... ./internal/...

.PHONY: run build test vet unit test-quic jxse-jar fuzz bench benchmarks swarm plans clean

# The paper's Tables 5-7 (AMTT of a control message against its XML
# element compressed) on the dsl and lan profiles: about a minute.
run: build
	./$(BIN) lab amtt --profile dsl,lan

# The commit built goes into the lab commands' run.json (--out): the
# toolchain stamps none under GOFLAGS=-buildvcs=false, as on this machine.
build:
	$(GO) build -ldflags "-X github.com/p2pmsg/p2pmsg/internal/provenance.BuildCommit=$$(git describe --always --dirty --abbrev=40 2>/dev/null)" -o $(BIN) ./cmd/p2pmsg

test: vet unit fuzz bench swarm plans
	@echo "make test: all checks passed"

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	@undoc=$$($(GO) list -f '{{if not .Doc}}{{.ImportPath}}{{end}}' ./...); test -z "$$undoc" || { echo "packages without a doc comment: $$undoc"; exit 1; }

# Race-enabled unit, integration and JXSE interop tests. CI=true makes the
# interop tests fail instead of skipping when Java or Maven is missing.
unit: jxse-jar
	$(GO) test -race -shuffle=on -count=1 -timeout 15m ./...

# The layers' tests again with every test node on loopback QUIC instead
# of TCP (internal/testutil.TransportEnv): not part of make test (about
# nine minutes here); for flake hunts and changes to stream handling.
# pkg/node and pkg/pathinfo stay out: their tests are about TCP and yamux
# (handshake slots, windows, emulated TCP links) and pick transports
# themselves where it matters.
test-quic: jxse-jar
	P2PMSG_TEST_TRANSPORT=quic $(GO) test -race -shuffle=on -count=1 -timeout 15m ./pkg/endpoint ./pkg/pipe ./pkg/socket ./internal/cli

# Fetch the JXSE 2.7 jar (and, for live JXSE peers, Netty 3.2.2 and
# Bouncy Castle 1.40) once, before test binaries run in parallel (the
# interop harness fetches it itself too when run alone).
jxse-jar:
	@if command -v mvn >/dev/null 2>&1; then \
	  mvn -q -B dependency:get -Dartifact=com.kenai.jxse:jxse:2.7 -Dtransitive=false && \
	  mvn -q -B dependency:get -Dartifact=org.jboss.netty:netty:3.2.2.Final -Dtransitive=false && \
	  mvn -q -B dependency:get -Dartifact=bouncycastle:bcprov-jdk15:140 -Dtransitive=false; \
	else echo "mvn not found: JXSE interop tests will skip (or fail under CI=true)"; fi

# Each fuzz target for a fixed number of iterations, from its seed corpus.
# A package's fuzz-instrumented test binary is built once and runs each of
# its targets in the package's directory, where go test -fuzz would link it
# again per target; the corpus cache is go test's own.
fuzz:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; cache=$$($(GO) env GOCACHE)/fuzz; \
	$(GO) list -f '{{.ImportPath}} {{.Dir}}' $(FUZZ_PKGS) | while read -r pkg dir; do \
	  grep -qs '^func Fuzz' "$$dir"/*_test.go || continue; \
	  bin="$$tmp/fuzz.test"; \
	  $(GO) test -c -fuzz . -o "$$bin" "$$pkg"; \
	  for target in $$("$$bin" -test.list '^Fuzz'); do \
	    echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
	    (cd "$$dir" && "$$bin" -test.run '^$$' -test.fuzz "^$$target\$$" -test.fuzztime $(FUZZTIME) -test.fuzzminimizetime $(FUZZMINTIME) \
	      -test.fuzzcachedir "$$cache/$$pkg") > "$$tmp/log" 2>&1 || { cat "$$tmp/log"; exit 1; }; \
	  done; \
	done

# Benchmarks run once so they cannot rot; figures come from `make benchmarks`.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./... > /dev/null

benchmarks:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

# Every swarm case with 20 peers in one process, checked complete: every
# message delivered where expected, no failure, nothing lost in silence.
swarm: build
	./$(BIN) lab swarm --peers 20 --check

# The Testground plans (testplans/, a module of its own, so ./... above
# does not reach it): vet, race-enabled tests, validation of the manifests
# and compositions with Testground's own types (testplans/validate, a
# module of its own too), then the dsl and lan AMTT compositions through
# the Docker-free local runner with PLANS_TRIALS trials, checked complete
# and physically sound (no control message beats its link; gzip cuts the
# 172 KB document's AMTT on dsl by more than half); then the swarm plan's
# propagate, resolve, relay (8 processes) and churn (10) cases, checked
# complete.
PLANS_TRIALS ?= 3
PLANS_OUT    ?= $(CURDIR)/testplans/results/ci
plans:
	cd testplans && $(GO) vet ./... && test -z "$$(gofmt -l .)"
	cd testplans && $(GO) test -race -shuffle=on -count=1 -timeout 10m ./...
	cd testplans/validate && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	rm -rf $(PLANS_OUT)
	cd testplans && $(GO) run ./cmd/tgrun run -f amtt/compositions/dsl.toml -f amtt/compositions/lan.toml \
	  --param trials=$(PLANS_TRIALS) --param warmup=0 --out $(PLANS_OUT) --run-id ci --timeout 3m
	cd testplans && $(GO) run ./cmd/amttcheck -results $(PLANS_OUT)/amtt/ci-dsl/amtt.jsonl -profile dsl \
	  -trials $(PLANS_TRIALS) -min-decrease gzip=50
	cd testplans && $(GO) run ./cmd/amttcheck -results $(PLANS_OUT)/amtt/ci-lan/amtt.jsonl -profile lan \
	  -trials $(PLANS_TRIALS)
	cd testplans && $(GO) run ./cmd/tgrun run -f swarm/compositions/ci-propagate.toml -f swarm/compositions/ci-resolve.toml \
	  -f swarm/compositions/ci-relay.toml -f swarm/compositions/ci-churn.toml --out $(PLANS_OUT) --run-id ci --timeout 3m
	cd testplans && $(GO) run ./cmd/swarmcheck -results $(PLANS_OUT)/swarm/ci-ci-propagate/swarm.jsonl -cases propagate -peers 8
	cd testplans && $(GO) run ./cmd/swarmcheck -results $(PLANS_OUT)/swarm/ci-ci-resolve/swarm.jsonl -cases resolve -peers 8
	cd testplans && $(GO) run ./cmd/swarmcheck -results $(PLANS_OUT)/swarm/ci-ci-relay/swarm.jsonl -cases relay -peers 8
	cd testplans && $(GO) run ./cmd/swarmcheck -results $(PLANS_OUT)/swarm/ci-ci-churn/swarm.jsonl -cases churn -peers 8

clean:
	rm -rf bin
