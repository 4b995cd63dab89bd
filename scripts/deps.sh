#!/usr/bin/env bash
# Installs what sandboxd needs to build and test, idempotently: apt runs only for what is missing.
set -euo pipefail
pkgs=(libseccomp-dev ripgrep jq bubblewrap gcc poppler-utils curl git zsh fish python3 e2fsprogs)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing ${missing[*]}; run as root (or: sudo apt-get install ${missing[*]})" >&2
		exit 1
	fi
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v go >/dev/null || { echo "deps: Go is not on PATH (need Go 1.26+)" >&2; exit 1; }
