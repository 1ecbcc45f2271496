# omnistage. `make demo` speaks a sentence; `make test` runs the tests.
# Both install what they need first (scripts/install-deps.sh: to build and
# run; with --test, what the tests use too).

GO ?= go
BIN := bin/omnistage
TEXT ?= Hello from omnistage. The talker, the vocoder and the aligner each ran as a stage.

.PHONY: deps test-deps build demo serve test test-short bench soak fuzz lint clean

deps:
	@scripts/install-deps.sh

test-deps:
	@scripts/install-deps.sh --test

build: deps
	$(GO) build -o $(BIN) ./cmd/omnistage

# demo synthesizes TEXT to hello.wav and prints its word timestamps.
demo: build
	$(BIN) say --timestamps -o hello.wav "$(TEXT)"
	@echo "wrote hello.wav"

# serve runs the built-in tts pipeline's HTTP API on 127.0.0.1:8080.
serve: build
	$(BIN) serve

test: test-deps
	$(GO) test -race -count=1 -timeout 25m ./...
	cd deploy && $(GO) test -count=1 -timeout 5m ./...
	cd test/browser && $(GO) test -count=1 -timeout 5m ./...

test-short: test-deps
	$(GO) test -race -short ./...

# soak loads the built-in pipeline for 30 minutes of mixed traffic with
# aborts and checks the server's memory stays flat (scripts/soak.sh;
# SOAK_DURATION shortens it); the result goes to soak-result.txt.
soak: test-deps
	scripts/soak.sh

# bench runs every benchmark; compare two runs with benchstat.
bench: test-deps
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./... | tee bench.txt

# fuzz runs each fuzz target for a minute: config decoding and route
# resolution, payload decoding, payload stream frames, the payload base64
# against the standard library's, the stage protocol's fast header reader
# against encoding/json, /v1/run JSON bodies, and the JSON bodies of
# /v1/audio/speech, /v1/generate and /v1/audio/captions.
fuzz: test-deps
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./internal/pipeline
	$(GO) test -run '^$$' -fuzz 'FuzzDecode$$' -fuzztime 60s ./internal/payload
	$(GO) test -run '^$$' -fuzz FuzzBase64 -fuzztime 60s ./internal/payload
	$(GO) test -run '^$$' -fuzz FuzzDecodeFlat -fuzztime 60s ./internal/stageproto
	$(GO) test -run '^$$' -fuzz FuzzStream -fuzztime 60s ./internal/payload
	$(GO) test -run '^$$' -fuzz FuzzReadRun -fuzztime 60s ./internal/stageserver
	$(GO) test -run '^$$' -fuzz FuzzRequestBodies -fuzztime 60s ./internal/api

# lint checks formatting, vet, that go.mod (and the tools module's) are
# tidy, staticcheck, built from the tools module at the version it pins,
# and the layout rules (tools/layoutcheck: files under 550 lines,
# functions under 100, each file's concern named in its first comment).
STATICCHECK := bin/staticcheck

$(STATICCHECK): tools/go.mod tools/go.sum
	cd tools && $(GO) build -o ../$(STATICCHECK) honnef.co/go/tools/cmd/staticcheck

lint: deps $(STATICCHECK)
	gofmt -l . | (! grep .)
	$(GO) vet ./...
	$(GO) mod tidy -diff
	cd tools && $(GO) mod tidy -diff
	cd deploy && $(GO) vet ./...
	cd deploy && $(GO) mod tidy -diff
	cd test/browser && $(GO) vet ./...
	cd test/browser && $(GO) mod tidy -diff
	$(STATICCHECK) ./...
	cd tools && $(GO) run ./layoutcheck ..

clean:
	rm -rf bin hello.wav bench.txt
