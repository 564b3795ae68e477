# p2pmsg — the two commands the README starts with:
#   make run    build p2pmsg and show what it does
#   make test   everything CI checks
# Both need only Go, Java and Maven on the machine; the JXSE 2.7 jar is
# fetched from Maven Central by the interop tests themselves.

GO        ?= go
BIN       := bin/p2pmsg
FUZZTIME  ?= 3000x
# Every go test -fuzz target, as package:Target.
FUZZ_PKGS := ./pkg/...

.PHONY: run build test vet unit jxse-jar fuzz bench benchmarks clean

run: build
	./$(BIN) --help

build:
	$(GO) build -o $(BIN) ./cmd/p2pmsg

test: vet unit fuzz bench
	@echo "make test: all checks passed"

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	@undoc=$$($(GO) list -f '{{if not .Doc}}{{.ImportPath}}{{end}}' ./...); test -z "$$undoc" || { echo "packages without a doc comment: $$undoc"; exit 1; }

# Race-enabled unit, integration and JXSE interop tests. CI=true makes the
# interop tests fail instead of skipping when Java or Maven is missing.
unit: jxse-jar
	$(GO) test -race -shuffle=on -count=1 -timeout 15m ./...

# Fetch the JXSE 2.7 jar once, before test binaries run in parallel (the
# interop harness fetches it itself too when run alone).
jxse-jar:
	@if command -v mvn >/dev/null 2>&1; then \
	  mvn -q -B dependency:get -Dartifact=com.kenai.jxse:jxse:2.7 -Dtransitive=false; \
	else echo "mvn not found: JXSE interop tests will skip (or fail under CI=true)"; fi

# Each fuzz target for a fixed number of iterations, from its seed corpus.
fuzz:
	@set -e; for pkg in $$($(GO) list $(FUZZ_PKGS)); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg > /tmp/p2pmsg-fuzz.log 2>&1 || { cat /tmp/p2pmsg-fuzz.log; exit 1; }; \
	  done; \
	done

# Benchmarks run once so they cannot rot; figures come from `make benchmarks`.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./... > /dev/null

benchmarks:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

clean:
	rm -rf bin
