#!/usr/bin/env bash
# Builds collector-config/dist/otelcol-prime with the official OpenTelemetry Collector Builder.
# Needs only `go` and the Go module proxy. A no-op when the binary exists and was built from the
# current manifest with the pinned builder (hash stored next to the binary).
set -euo pipefail

OCB_VERSION=v0.160.0
OCB_MODULE=go.opentelemetry.io/collector/cmd/builder

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MANIFEST="$HERE/manifest.yaml"
DIST="$HERE/dist"
BIN_DIR="$DIST/bin"
BINARY="$DIST/otelcol-prime"
STAMP="$DIST/otelcol-prime.manifest.sha256"

log() { printf 'collector build: %s\n' "$*" >&2; }

if ! command -v go >/dev/null 2>&1; then
    log "go is not installed; cannot build the collector"
    exit 2
fi

# Every component must sit on the builder's release, or ocb's strict version check fails late.
mismatched="$(grep -E '^\s*-\s*gomod:' "$MANIFEST" | grep -v " ${OCB_VERSION}\$" || true)"
if [[ -n "$mismatched" ]]; then
    log "manifest components not at ${OCB_VERSION}:"
    printf '%s\n' "$mismatched" >&2
    exit 1
fi

mkdir -p "$BIN_DIR"
# Serialises concurrent callers (make collector and a test fixture, say).
exec 9>"$DIST/.build.lock"
flock 9

wanted="$( { printf '%s\n' "$OCB_VERSION"; cat "$MANIFEST"; } | sha256sum | cut -d' ' -f1)"
if [[ -x "$BINARY" && -f "$STAMP" && "$(cat "$STAMP")" == "$wanted" ]]; then
    log "up to date: $BINARY (manifest unchanged)"
    exit 0
fi

start=$SECONDS
if [[ "$("$BIN_DIR/builder" version 2>&1 || true)" != *"${OCB_VERSION}" ]]; then
    log "installing ${OCB_MODULE}@${OCB_VERSION} into $BIN_DIR"
    GOBIN="$BIN_DIR" go install "${OCB_MODULE}@${OCB_VERSION}"
fi
installed=$SECONDS
log "builder ready in $((installed - start))s"

rm -f "$STAMP"
log "generating sources and resolving modules (go $(go env GOVERSION), $(nproc) cores)"
# ocb resolves dist.output_path against the working directory.
(cd "$HERE/.." && "$BIN_DIR/builder" --config="$MANIFEST" --skip-compilation)
generated=$SECONDS
log "sources and modules ready in $((generated - installed))s"

(cd "$HERE/.." && "$BIN_DIR/builder" --config="$MANIFEST" --skip-generate --skip-get-modules)
printf '%s\n' "$wanted" >"$STAMP"
done_at=$SECONDS
log "compiled in $((done_at - generated))s; total $((done_at - start))s"
log "built $BINARY ($(du -h "$BINARY" | cut -f1))"
