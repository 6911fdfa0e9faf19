# barista build, test and tooling targets. Run "make help" for the list.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
GO ?= go

# Packages that start real processes run one at a time (-p 1).
UNIT_PKGS := $(shell $(GO) list ./... 2>/dev/null | grep -v -E '^github.com/baristahq/barista/test(/|$$)')
PROC_PKGS := $(shell $(GO) list ./test/... 2>/dev/null)

.PHONY: help build dist dist-check typecheck-python test test-unit test-unfair test-examples test-fuzz test-proc test-python test-typescript test-typescript-run test-upgrade lint bench chaos soak ratelimit noisy-neighbour handoff fuzz proto proto-python proto-typescript run clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

build: ## build bin/barista
	$(GO) build -o bin/barista ./cmd/barista

test: test-unit test-unfair test-examples test-proc test-python test-typescript ## run the test suite (the README's test command)

# A race-enabled binary sleeps a second at exit (the race detector's
# atexit_sleep_ms) unless told not to; the tests start many.
test-unit:
	GORACE="atexit_sleep_ms=0 $(GORACE)" $(GO) test -race -count=1 -timeout 10m $(UNIT_PKGS)

# The evidence of fairness against a build whose fair pick breaks the
# order (sfq's unfairpick tag): certificates fail, the fairness error
# rises (docs/fairness.md). A few seconds.
test-unfair: ## the evidence of fairness against a build that dispatches out of order (a few seconds)
	$(GO) test -tags unfairpick -count=1 -run 'Forced' ./snapshot/

# examples/ is a module of its own that requires this one (through a
# replace), the way a program using the Go client does.
test-examples: ## build and vet the examples module
	cd examples && $(GO) build -o /dev/null ./... && $(GO) vet ./...

test-proc: build
	@if [ -n "$(PROC_PKGS)" ]; then $(GO) test -count=1 -p 1 -timeout 20m $(PROC_PKGS); fi

# The Python SDK's tests (sdk/python/tests, pytest with pytest-asyncio)
# against three servers of bin/barista, with Debian's python3 and its
# packages; where they are missing the target says so and passes
# (.ci/run installs them).
PYTHON3 ?= /usr/bin/python3
test-python: build typecheck-python ## the Python SDK's tests (pytest, under a minute) against a three-node cluster of bin/barista, after mypy --strict; skipped where python3, grpc, protobuf, pytest or pytest-asyncio is missing
	@if ! $(PYTHON3) -c 'import grpc, google.protobuf, pytest, pytest_asyncio' 2>/dev/null; then \
		echo "test-python: skipped: $(PYTHON3) cannot import grpc, google.protobuf, pytest and pytest_asyncio (apt-get install python3-grpcio python3-protobuf python3-pytest python3-pytest-asyncio)"; \
	else \
		cd sdk/python && BARISTA_BIN=$(CURDIR)/bin/barista PYTHONDONTWRITEBYTECODE=1 $(PYTHON3) -m pytest -q -p no:cacheprovider -rs tests; \
	fi

# mypy --strict on the Python SDK (its configuration: sdk/python/pyproject.toml),
# with Debian's mypy; a few seconds. Skipped, saying so, where mypy is missing.
typecheck-python: ## mypy --strict on the Python SDK and a typed worker of it (tests/typed_jobs.py); skipped where python3-mypy is missing
	@if ! $(PYTHON3) -m mypy --version >/dev/null 2>&1; then \
		echo "typecheck-python: skipped: $(PYTHON3) has no mypy (apt-get install python3-mypy)"; \
	else \
		cd sdk/python && $(PYTHON3) -m mypy --cache-dir=/dev/null; \
	fi

# The TypeScript SDK's tests (sdk/typescript/test, node --test) against
# three servers of bin/barista, with Node 18.14 or later and the packages
# of the SDK's and examples/typescript-worker's lockfiles (npm ci, again
# whenever a lockfile is newer than what it installed); tsc builds the SDK,
# its tests and the example first. Where node or npm is missing the target
# says so and passes (.ci/run installs them).
TS_EXAMPLE := examples/typescript-worker
define npm_ci
	@if [ ! -f $(1)/node_modules/.package-lock.json ] || [ $(1)/package-lock.json -nt $(1)/node_modules/.package-lock.json ]; then \
		echo "npm ci in $(1)"; (cd $(1) && npm ci --no-audit --no-fund --loglevel=error); fi
endef
test-typescript: build ## the TypeScript SDK's tests (node --test, under a minute) against a three-node cluster of bin/barista; skipped where node or npm is missing
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null || ! node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>18||(a==18&&b>=14)?0:1)'; then \
		echo "test-typescript: skipped: node (18.14 or later) or npm is missing (apt-get install nodejs npm)"; \
	else \
		$(MAKE) --no-print-directory test-typescript-run; \
	fi

test-typescript-run:
	$(call npm_ci,$(TS_SDK))
	$(call npm_ci,$(TS_EXAMPLE))
	rm -rf $(TS_SDK)/dist && cd $(TS_SDK) && node_modules/.bin/tsc -p .
	cd $(TS_EXAMPLE) && node_modules/.bin/tsc -p .
	cd $(TS_SDK) && BARISTA_BIN=$(CURDIR)/bin/barista node --test dist/test/*.test.js

# this build beside the previous release: PREVIOUS_REV's source (git
# archive, in a temporary directory) is built into bin/previous/barista, then the tests of
# test/previous_test.go run the two together (a previous worker on this
# cluster, this build's workers on a previous cluster).
PREVIOUS_REV ?= a9a5f74
test-upgrade: build ## this build beside the previous release (PREVIOUS_REV, a9a5f74): its worker on this cluster, this build's workers on its cluster (about 2 minutes; needs the git history)
	rm -rf bin/previous && mkdir -p bin/previous
	src=$$(mktemp -d) && git archive $(PREVIOUS_REV) | tar -x -C $$src && \
		(cd $$src && $(GO) build -o $(CURDIR)/bin/previous/barista ./cmd/barista); rc=$$?; rm -rf $$src; exit $$rc
	BARISTA_BIN=$(CURDIR)/bin/barista BARISTA_PREVIOUS_BIN=$(CURDIR)/bin/previous/barista $(GO) test -count=1 -p 1 -timeout 10m -run 'Previous' -v ./test/

# The release's artifacts (docs/releasing.md): scripts/dist.sh says what
# each is and what it needs; nothing is downloaded.
dist: ## the release's artifacts in dist/, built offline and reproducibly: the server for linux/amd64 and linux/arm64, the Python sdist and wheel, the TypeScript package, SHA256SUMS and MANIFEST.json (about 2 minutes)
	scripts/dist.sh dist

dist-check: ## make dist twice (the second from a copy of the tree, with an empty Go build cache) and compare every byte; then install the wheel offline into a fresh venv and run the Python example on a cluster of the release's binary (about 6 minutes)
	scripts/dist-check.sh dist

lint: ## gofmt check, go vet, staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

bench: build ## quick run of every barista bench scenario, then the Go benchmarks of the core (about 4 minutes)
	bin/barista bench all --quick
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1s ./sfq/ ./fsm/

# Long chaos run: make chaos CHAOS_SEED=7 CHAOS_DURATION=20m CHAOS_NODES=5
CHAOS_SEED ?= $(shell date +%s)
CHAOS_DURATION ?= 20m
CHAOS_NODES ?= 3
chaos: build ## long chaos run: faults under load, then the invariant checker (CHAOS_SEED, CHAOS_DURATION=20m, CHAOS_NODES=3|5)
	CHAOS_SEED=$(CHAOS_SEED) CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_NODES=$(CHAOS_NODES) \
		$(GO) test -count=1 -timeout 0 -run '^TestChaos$$' -v ./test/chaos/ 2>&1 | grep -v '^\s*20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T' ; exit $${PIPESTATUS[0]}

# Soak: make soak SOAK_DURATION=1h SOAK_RATE=300 SOAK_REPORT=soak.jsonl
SOAK_DURATION ?= 1h
SOAK_RATE ?= 300
SOAK_REPORT ?= soak.jsonl
soak: build ## steady load on 3 servers and real workers for SOAK_DURATION (1h) at SOAK_RATE jobs/s (300); fails if memory, goroutines, files, raft.db or p99s grow over 10 % after warm-up; report in SOAK_REPORT
	BARISTA_SOAK=1 SOAK_DURATION=$(SOAK_DURATION) SOAK_RATE=$(SOAK_RATE) SOAK_REPORT=$(abspath $(SOAK_REPORT)) \
		$(GO) test -count=1 -timeout 0 -run '^TestSoak$$' -v ./test/soak/ 2>&1 | grep -v '^\s*20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T' ; exit $${PIPESTATUS[0]}

# Rate limits measured with real workers: make ratelimit RATE_DURATION=5m
RATE_DURATION ?= 5m
ratelimit: build ## a tenant at rate=60/1m burst=5 beside another on 3 servers and 4 real workers for RATE_DURATION (5m); checks every window of its dispatches
	BARISTA_RATE_TEST_DURATION=$(RATE_DURATION) $(GO) test -count=1 -timeout 0 -run '^TestRateLimitRealWorkers$$' -v ./test/ 2>&1 | grep -v '^\s*20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T' ; exit $${PIPESTATUS[0]}

# Noisy neighbour at the door: make noisy-neighbour NOISY_PHASE=20s
# NOISY_FLOODS=health-watches,held-reads NOISY_REPORT=noisy.json
NOISY_PHASE ?= 20s
handoff: build ## kill 20 leaders right after an Assign and report how soon the job ran again (p50, max)
	BARISTA_HANDOFF_TRIES=20 $(GO) test -count=1 -p 1 -timeout 20m -run 'TestHandoffLeaderKilledAfterAssign' -v ./test/ | grep -E 'handoff_test|^(ok|FAIL|---)'

noisy-neighbour: build ## one tenant (or no token) floods each shared edge resource of a TLS cluster on namespaced addresses while another submits, reads and watches; fails unless 99 % of its calls succeed and no event of it is lost; prints its p50/p99 against baseline (as root; about 4 minutes)
	BARISTA_NOISY=1 BARISTA_BIN=$(CURDIR)/bin/barista NOISY_PHASE=$(NOISY_PHASE) NOISY_FLOODS=$(NOISY_FLOODS) NOISY_REPORT=$(if $(NOISY_REPORT),$(abspath $(NOISY_REPORT))) \
		$(GO) test -count=1 -timeout 0 -run '^TestNoisyNeighbour$$' -v ./test/noisy/ 2>&1 | grep -v '^\s*20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T' ; exit $${PIPESTATUS[0]}

# Every Fuzz* function of the module (scripts/fuzz.sh finds them). make test
# runs their committed seeds (testdata/fuzz) as plain tests; make test-fuzz
# explores each for FUZZ_SHORT, make fuzz for FUZZTIME.
FUZZTIME ?= 2m
FUZZ_SHORT ?= 3s
fuzz: ## run every fuzz target for FUZZTIME each (default 2m); a failing input lands in the package's testdata/fuzz
	scripts/fuzz.sh $(FUZZTIME)

test-fuzz: ## run every fuzz target for FUZZ_SHORT each (3s)
	scripts/fuzz.sh $(FUZZ_SHORT)

# The Go code of the .proto files goes to the package each names
# (go_package): the wire that clients and workers speak (client, worker,
# admin, types: package pb in proto/) and the replicated commands with the
# nodes' own service (commands, node: package clusterpb in
# proto/clusterpb/). The HTTP/JSON gateway of their services goes to a
# package of its own, proto/gateway (grpc-gateway's standalone mode; its
# files' package clause renamed), so that importing the wire does not
# import the gateway's runtime. The gateway and its OpenAPI document
# (proto/barista.swagger.json) come from the routes in
# proto/barista.http.yaml.
GATEWAY_OPTS := grpc_api_configuration=proto/barista.http.yaml
GO_PROTO_OPT := module=github.com/baristahq/barista
proto: ## regenerate the protobuf Go code (with its reflection-free codec), the HTTP/JSON gateway and its OpenAPI document (needs protoc: apt-get install protobuf-compiler)
	@command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler"; exit 1; }
	rm -f proto/*.pb.go proto/clusterpb/*.pb.go proto/gateway/*.pb.gw.go
	protoc -I proto --plugin=protoc-gen-go=$$($(GO) tool -n protoc-gen-go) \
		--go_out=. --go_opt=$(GO_PROTO_OPT) proto/*.proto
	protoc -I proto --plugin=protoc-gen-go-grpc=$$($(GO) tool -n protoc-gen-go-grpc) \
		--go-grpc_out=. --go-grpc_opt=$(GO_PROTO_OPT) proto/*.proto
	protoc -I proto --plugin=protoc-gen-go-vtproto=$$($(GO) tool -n protoc-gen-go-vtproto) \
		--go-vtproto_out=. --go-vtproto_opt=$(GO_PROTO_OPT),features=marshal+marshal_strict+unmarshal+size proto/*.proto
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	protoc -I proto --plugin=protoc-gen-grpc-gateway=$$($(GO) tool -n protoc-gen-grpc-gateway) \
		--grpc-gateway_out=$$tmp --grpc-gateway_opt=$(GO_PROTO_OPT),standalone=true,omit_package_doc=true,$(GATEWAY_OPTS) proto/*.proto && \
	mkdir -p proto/gateway && for f in $$(find $$tmp -name '*.pb.gw.go'); do \
		sed -E 's/^package [a-z]+$$/package gateway/' "$$f" >proto/gateway/$$(basename "$$f"); done
	protoc -I proto --plugin=protoc-gen-openapiv2=$$($(GO) tool -n protoc-gen-openapiv2) \
		--openapiv2_out=proto --openapiv2_opt=$(GATEWAY_OPTS),allow_merge=true,merge_file_name=barista,json_names_for_fields=false proto/*.proto
	$(MAKE) --no-print-directory proto-python
	$(MAKE) --no-print-directory proto-typescript

# The Python SDK's generated code (sdk/python/src/barista/_proto) comes
# from the wire's .proto files (those of Go package pb: client, worker,
# admin, types; not the replicated commands or the nodes' own service),
# copied under the package's path so that each module imports its
# neighbours as barista._proto.X and registers its file as
# barista/_proto/X.proto (a name no other package's files take), and from
# sdk/python/proto/rpc_status.proto (the google.rpc status and error
# details a refusal carries). Each message module comes with its typing
# stub (*_pb2.pyi, protoc's --pyi_out), which mypy reads.
PY_PROTO_PKG := barista/_proto
PY_PROTO_OUT := sdk/python/src
WIRE_PROTOS = $(shell grep -l 'go_package = "github.com/baristahq/barista/proto;pb"' proto/*.proto)
proto-python: ## regenerate the Python SDK's protobuf and gRPC code (needs protoc and grpc_python_plugin: apt-get install protobuf-compiler protobuf-compiler-grpc)
	@command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler"; exit 1; }
	@command -v grpc_python_plugin >/dev/null || { echo "grpc_python_plugin not found: apt-get install protobuf-compiler-grpc"; exit 1; }
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && mkdir -p "$$tmp/$(PY_PROTO_PKG)" && \
	for f in $(WIRE_PROTOS) sdk/python/proto/*.proto; do \
		sed -E 's|^import "([a-z_]+)\.proto";|import "$(PY_PROTO_PKG)/\1.proto";|' "$$f" >"$$tmp/$(PY_PROTO_PKG)/$$(basename "$$f")"; \
	done && \
	rm -f $(PY_PROTO_OUT)/$(PY_PROTO_PKG)/*_pb2*.py $(PY_PROTO_OUT)/$(PY_PROTO_PKG)/*_pb2.pyi && \
	protoc -I "$$tmp" --python_out=$(PY_PROTO_OUT) --pyi_out=$(PY_PROTO_OUT) "$$tmp"/$(PY_PROTO_PKG)/*.proto && \
	protoc -I "$$tmp" --plugin=protoc-gen-grpc_python=$$(command -v grpc_python_plugin) --grpc_python_out=$(PY_PROTO_OUT) \
		$$(for f in $$(grep -l "^service " $(WIRE_PROTOS)); do echo "$$tmp/$(PY_PROTO_PKG)/$$(basename "$$f")"; done)

# The TypeScript SDK's generated code (sdk/typescript/src/gen, one *_pb.ts
# a .proto file, messages and service descriptors) comes from the wire's
# .proto files (WIRE_PROTOS, as the Python SDK's) and
# sdk/python/proto/rpc_status.proto, by protoc-gen-es, a package of the
# SDK's (npm ci in sdk/typescript installs it).
TS_SDK := sdk/typescript
TS_PROTO_OUT := $(TS_SDK)/src/gen
proto-typescript: ## regenerate the TypeScript SDK's protobuf code (needs protoc, and npm to install the SDK's packages if they are missing)
	@command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler"; exit 1; }
	@test -x $(TS_SDK)/node_modules/.bin/protoc-gen-es || { command -v npm >/dev/null && (cd $(TS_SDK) && npm ci --no-audit --no-fund --loglevel=error); } || \
		{ echo "protoc-gen-es not found, and npm ci in $(TS_SDK) could not install it (apt-get install nodejs npm)"; exit 1; }
	rm -f $(TS_PROTO_OUT)/*_pb.ts
	protoc -I proto -I sdk/python/proto --plugin=protoc-gen-es=$(TS_SDK)/node_modules/.bin/protoc-gen-es \
		--es_out=$(TS_PROTO_OUT) --es_opt=target=ts,import_extension=js $(WIRE_PROTOS) sdk/python/proto/rpc_status.proto

run: build ## run a local cluster with workers and demo load (Ctrl-C stops it)
	bin/barista dev

clean: ## remove bin/ (the built binary)
	rm -rf bin
