#!/usr/bin/env bash
# install-deps.sh installs the Debian packages omnistage builds and tests
# against (the Flite and PocketSphinx engines and the mp3, Opus and FLAC
# encoders are linked through cgo), if any is missing; the flite command is
# the acceptance tests' reference, ffmpeg encodes aac at run time and, with
# mpg123, opus-tools and flac, decodes the encoders' output in their tests,
# and iproute2, curl and openssl run the README's two-host example in network
# namespaces; espeak-ng and Python 3 (Debian's, unless a python3 is already
# installed) run examples/espeak, whose stages are Python programs over
# espeak-ng, and the Python SDK's tests (python3-websockets: the README's
# WebSocket client). Node.js (Debian's, unless a node is already installed) and the
# OpenAI Node SDK pinned in test/openai-node run the SDK compatibility test,
# and chromium, headless, runs the web playground's test (test/browser).
# It uses sudo when not run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential pkg-config flite flite1-dev libpocketsphinx-dev libsphinxbase-dev pocketsphinx-en-us libmp3lame-dev libopusenc-dev libflac-dev ffmpeg mpg123 opus-tools flac iproute2 curl openssl chromium espeak-ng python3-websockets)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	missing+=(nodejs npm)
fi
if ! command -v python3 >/dev/null; then
	missing+=(python3)
fi

if [ ${#missing[@]} -gt 0 ]; then
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		sudo="sudo"
	fi
	echo "installing: ${missing[*]}" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The SDK at the version package-lock.json pins, from the npm registry.
if [ ! -d test/openai-node/node_modules/openai ]; then
	echo "installing: the OpenAI Node SDK (npm ci in test/openai-node)" >&2
	npm ci --prefix test/openai-node --no-audit --no-fund --loglevel=error >/dev/null
fi
