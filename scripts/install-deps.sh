#!/usr/bin/env bash
# install-deps.sh installs the Debian packages omnistage builds and tests
# against (the Flite and PocketSphinx engines are linked through cgo), if any
# is missing; the flite command is the acceptance tests' reference, and
# iproute2, curl and openssl run the README's two-host example in network
# namespaces. It uses sudo when not run as root.
set -euo pipefail

packages=(build-essential pkg-config flite flite1-dev libpocketsphinx-dev libsphinxbase-dev pocketsphinx-en-us iproute2 curl openssl)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
echo "installing: ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
