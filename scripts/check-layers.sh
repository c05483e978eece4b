#!/bin/sh
# check-layers.sh -- fails when an #include crosses ctorch's layers the wrong
# way (../shared/DESIGN.md, issue 17 item 7).  Run from the repository root
# (make test runs it).  The layers, bottom up:
#
#   core                     tensors, storage, errors, scopes, the device table
#   ops                      the op table, meta logic, dispatch   (may use core)
#   backend/<dev>            kernels of one device                (core, ops, backend-common)
#   backend-common           src/backend/*.c: what backends share (core, ops)
#   autograd                 reverse/forward AD                   (core, ops)
#   io data text             files, datasets, tokenizers          (core, ops, io)
#   nn optim                 modules, optimizers                  (core, ops, autograd, io, data, nn)
#   compile                  capture, passes, codegen, build     (core, ops, autograd, nn)
#   func                     function transforms, vmap           (core, ops, autograd, nn, compile)
#
# and: nothing outside src/backend includes a file under src/backend/ except
# src/backend/registry.c (the one place that names the backends); a backend
# includes no other backend's files.  ALLOW below lists known crossings
# still to remove (none today: issue 17 item 5 removed the last); a new
# crossing fails, and so does an ALLOW line that no longer matches anything.
set -eu
cd "$(dirname "$0")/.."

# "from-file included-file": crossings that exist today, each to be removed
ALLOW="${CT_LAYERS_ALLOW-scripts/layers-allow.txt}"

layer_of() { # path under src/ -> layer name
    case "$1" in
        src/core/*) echo core ;;
        src/ops/*) echo ops ;;
        src/backend/registry.c) echo registry ;;
        src/backend/fallback.c) echo backend:fallback ;;
        src/backend/*/*) echo "backend:$(echo "$1" | cut -d/ -f3)" ;;
        src/backend/*) echo backend-common ;;
        src/autograd/*) echo autograd ;;
        src/io/*) echo io ;;
        src/data/*) echo data ;;
        src/text/*) echo text ;;
        src/nn/*) echo nn ;;
        src/optim/*) echo optim ;;
        src/compile/*) echo compile ;;
        src/func/*) echo func ;;
        *) echo other ;;
    esac
}

may_include() { # from-layer to-layer -> 0 when allowed
    f=$1 t=$2
    [ "$f" = "$t" ] && return 0
    case "$t" in other) return 0 ;; esac
    case "$f:$t" in
        ops:core) return 0 ;;
        backend:*:core|backend:*:ops) return 0 ;;
        backend:*:backend-common|backend-common:core|backend-common:ops) return 0 ;;
        registry:core|registry:backend:*) return 0 ;;
        autograd:core|autograd:ops) return 0 ;;
        io:core|io:ops|data:core|data:ops|data:io|text:core|text:ops|text:io) return 0 ;;
        nn:core|nn:ops|nn:autograd|nn:io|nn:data|nn:text) return 0 ;;
        optim:core|optim:ops|optim:autograd|optim:nn|optim:io|optim:data) return 0 ;;
        compile:core|compile:ops|compile:autograd|compile:nn) return 0 ;;
        func:core|func:ops|func:autograd|func:nn|func:compile) return 0 ;;
    esac
    return 1
}

found=$(mktemp)
trap 'rm -f "$found"' EXIT
for src in $(find src -name '*.c' -o -name '*.h' -o -name '*.def' | sort); do
    dir=$(dirname "$src")
    grep -oE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[^"]+"' "$src" | sed -E 's/.*"([^"]+)"/\1/' |
    while read -r inc; do
        case "$inc" in ctorch/*) continue ;; esac
        target=$(realpath -m --relative-to=. "$dir/$inc")
        [ -e "$target" ] || continue
        fl=$(layer_of "$src")
        tl=$(layer_of "$target")
        if ! may_include "$fl" "$tl"; then echo "$src $target"; fi
    done
done >"$found"

status=0
while read -r line; do
    if ! grep -qxF "$line" "$ALLOW" 2>/dev/null; then
        echo "check-layers: $(echo "$line" | cut -d' ' -f1) includes $(echo "$line" | cut -d' ' -f2): \
$(layer_of "$(echo "$line" | cut -d' ' -f1)") may not depend on $(layer_of "$(echo "$line" | cut -d' ' -f2)")" >&2
        status=1
    fi
done <"$found"
if [ -f "$ALLOW" ]; then
    grep -vE '^(#|$)' "$ALLOW" | while read -r line; do
        if ! grep -qxF "$line" "$found"; then
            echo "check-layers: $ALLOW lists '$line', which no longer exists: remove the line" >&2
            exit 1
        fi
    done || status=1
fi
n=$(wc -l <"$found")
if [ "$status" -eq 0 ]; then
    echo "check-layers: ok ($n known crossings left in $ALLOW)"
fi
exit "$status"
