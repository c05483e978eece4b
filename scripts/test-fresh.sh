#!/bin/sh
# test-fresh.sh -- the README's two commands on a freshly bootstrapped Debian 12.
#
# Bootstraps a minimal Debian 12 (bookworm) root with debootstrap (variant
# minbase, plus git and make only), clones this repository's HEAD into it and
# runs `make demo` then `make test` there, exactly as the README says:
#   - as root, and
#   - as an ordinary user with sudo (sudo added to the root; the user's
#     install-deps.sh goes through sudo for apt-get).
# Each flavour starts from its own copy of the bare root, so each installs
# everything itself.  Prints one line per step with its time, the demo's test
# accuracy and ctest's summary, and exits non-zero if any step fails (the
# step's log is kept and its path printed).
#
#   sh scripts/test-fresh.sh            both flavours (about 15 minutes on 2 cores)
#   CT_FRESH_AS=root sh scripts/test-fresh.sh      one flavour (root | sudo)
#
# Needs root (debootstrap, chroot, mounts) and debootstrap itself
# (`CT_WITH_FRESH=1 sh scripts/install-deps.sh` installs it).  The packages
# come from the mirror in this machine's own apt sources.  The bare root is
# cached in ${CT_FRESH_CACHE:-/var/cache/ctorch-fresh} for a day; the
# flavours' roots are removed at the end unless CT_FRESH_KEEP=1.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
as_list=${CT_FRESH_AS:-root sudo}
cache=${CT_FRESH_CACHE:-/var/cache/ctorch-fresh}
suite=bookworm

say() { echo "test-fresh: $*"; }
die() { echo "test-fresh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || { echo "test-fresh: needs root (debootstrap, chroot, mount): run it as root or with sudo" >&2; exit 2; }
command -v debootstrap >/dev/null 2>&1 || {
  echo "test-fresh: debootstrap is missing: CT_WITH_FRESH=1 sh scripts/install-deps.sh (or apt-get install debootstrap)" >&2
  exit 2; }
git -C "$top" rev-parse HEAD >/dev/null 2>&1 || die "$top is not a git checkout"
[ -z "$(git -C "$top" status --porcelain --untracked-files=no)" ] ||
  say "note: uncommitted changes are not tested (the fresh root clones HEAD, $(git -C "$top" rev-parse --short HEAD))"

# the Debian mirror this machine's apt uses (deb822 .sources or one-line .list)
mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {print $2; exit}')
[ -n "$mirror" ] || mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
  awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }')
[ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list*"

now() { date +%s; }
# the proxy variables of this machine, if any (no spaces in their values)
netenv=$(env | grep -E '^(https?|no|all)_proxy=|^(HTTPS?|NO|ALL)_PROXY=' | grep -v ' ' | tr '\n' ' ')
work=$(mktemp -d "${TMPDIR:-/var/tmp}/ctorch-fresh.XXXXXX") || die "mktemp failed"
mounted=""
unmount_all() {
  for m in $mounted; do umount -R "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
  mounted=""
}
# removes a folder only when nothing is mounted below it (a bind mount of /dev
# left behind must never be deleted through)
remove_tree() {
  if grep -q " $1/" /proc/mounts; then
    say "not removing $1: something is still mounted below it"
    return 1
  fi
  rm -rf --one-file-system "$1"
}
cleanup() {
  unmount_all
  if [ "${CT_FRESH_KEEP:-0}" = 1 ] || [ "${failed:-0}" = 1 ]; then
    say "roots and logs kept in $work"
  else
    remove_tree "$work"
  fi
}
trap cleanup EXIT
trap 'failed=1; exit 130' INT TERM

# step NAME LOG CMD...: runs CMD with its output in LOG, prints the time
step() {
  name=$1 log=$2; shift 2
  t0=$(now)
  "$@" >"$log" 2>&1
  rc=$?
  t1=$(now)
  if [ $rc -ne 0 ]; then
    say "FAILED: $name (exit $rc, $((t1 - t0)) s); the end of $log:"
    tail -n 40 "$log" | sed 's/^/    /'
    failed=1
    return $rc
  fi
  say "$name: ok in $((t1 - t0)) s"
  return 0
}

# ---- the bare root, cached ---------------------------------------------------
mkdir -p "$cache" || die "cannot create $cache"
base="$cache/$suite-minbase-git-make.tar"
if [ ! -f "$base" ] || [ -n "$(find "$base" -mmin +1440 2>/dev/null)" ]; then
  rm -rf "$work/base"
  step "debootstrap --variant=minbase --include=git,make $suite (mirror from this machine's apt sources)" \
    "$work/debootstrap.log" debootstrap --variant=minbase --include=git,make "$suite" "$work/base" "$mirror" ||
    exit 1
  tar -C "$work/base" -cf "$base.tmp.$$" . && mv "$base.tmp.$$" "$base" || die "cannot write $base"
  rm -rf "$work/base"
else
  say "bare $suite root from the cache ($base)"
fi

# ---- one flavour -------------------------------------------------------------
run_flavour() {
  as=$1
  root="$work/$as"
  mkdir -p "$root" && tar -C "$root" -xf "$base" || { say "cannot unpack $base"; failed=1; return 1; }
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
  # this site's network settings, as its admin set them on this machine: a
  # pip.conf and a CA bundle (a site that inspects TLS adds its own CA there);
  # the proxy variables are passed in by runas.  Nothing else comes along.
  [ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    mkdir -p "$root/etc/ssl/certs" && cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
  fi
  # ... and the site's own CAs where Debian's ca-certificates package picks
  # them up again when apt installs it (it rebuilds the bundle)
  if [ -d /usr/local/share/ca-certificates ]; then
    mkdir -p "$root/usr/local/share/ca-certificates" &&
      cp -R /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
  fi
  for d in proc sys dev; do
    case $d in
      proc) mount -t proc proc "$root/proc" ;;
      *) mount --rbind "/$d" "$root/$d" && mount --make-rslave "$root/$d" ;;
    esac || { say "cannot mount /$d in $root"; failed=1; return 1; }
    mounted="$root/$d $mounted"
  done
  if [ "$as" = root ]; then
    home=/root
    git clone -q --no-local "$top" "$root$home/ctorch" || { failed=1; return 1; }
    runas() { chroot "$root" env -i $netenv HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 sh -c "cd /root/ctorch && $1"; }
  else
    home=/home/ctuser
    step "[$as] setup: apt-get install sudo; a user ctuser with sudo rights" "$work/$as-setup.log" \
      chroot "$root" sh -c 'export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install -y -q sudo &&
        useradd -m -s /bin/sh ctuser && echo "ctuser ALL=(ALL) NOPASSWD:ALL" > /etc/sudoers.d/ctuser &&
        chmod 440 /etc/sudoers.d/ctuser' || return 1
    git clone -q --no-local "$top" "$root$home/ctorch" || { failed=1; return 1; }
    chroot "$root" chown -R ctuser:ctuser "$home/ctorch"
    runas() { chroot "$root" runuser -u ctuser -- env -i $netenv HOME=$home USER=ctuser \
      PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 sh -c "cd $home/ctorch && $1"; }
  fi
  step "[$as] make demo" "$work/$as-demo.log" runas "make demo" || return 1
  acc=$(grep -i "test acc" "$work/$as-demo.log" | tail -n 1)
  say "[$as]   demo: ${acc:-no accuracy line found}"
  step "[$as] make test" "$work/$as-test.log" runas "make test" || return 1
  summary=$(grep -E "tests passed|tests failed" "$work/$as-test.log" | tail -n 1)
  say "[$as]   test: $summary"
  # the README's linking section, as written: a system prefix (make install,
  # ldconfig, pkg-config shared and static), a private prefix, and its CMake project
  if [ "$as" = root ]; then
    step "[$as] README linking: make install + ldconfig, pkg-config shared/static, private prefix, CMake" \
      "$work/$as-link.log" runas 'set -e; make install >/dev/null; ldconfig
        d=$(mktemp -d); cp examples/quickstart.c $d/app.c; cd $d   # $OLDPWD: the clone
        cc app.c $(pkg-config --cflags --libs ctorch) -o app && ./app | grep -q "tensor("
        cc app.c $(pkg-config --cflags --libs ctorch-static) -o app_static && ./app_static | grep -q "tensor("
        cmake --install $OLDPWD/build --prefix $d/pfx >/dev/null
        PKG_CONFIG_PATH=$d/pfx/lib/pkgconfig cc app.c $(PKG_CONFIG_PATH=$d/pfx/lib/pkgconfig pkg-config --cflags --libs ctorch) \
          -Wl,-rpath,$d/pfx/lib -o app_private && ./app_private | grep -q "tensor("
        sed -n "/^\`\`\`cmake\$/,/^\`\`\`\$/p" $OLDPWD/README.md | sed "1d;\$d" > CMakeLists.txt
        grep -q find_package CMakeLists.txt
        cmake -S . -B build >/dev/null && cmake --build build >/dev/null && ./build/app | grep -q "tensor("
        cmake -S . -B build2 -DCMAKE_PREFIX_PATH=$d/pfx >/dev/null && cmake --build build2 >/dev/null && ./build2/app | grep -q "tensor("' || return 1
  fi
  unmount_all
  [ "${CT_FRESH_KEEP:-0}" = 1 ] || remove_tree "$root"
  return 0
}

failed=0
t_all=$(now)
for as in $as_list; do
  case $as in root|sudo) ;; *) die "CT_FRESH_AS: unknown flavour '$as' (root | sudo)" ;; esac
  run_flavour "$as" || break
done
say "done in $(( $(now) - t_all )) s: $( [ $failed = 0 ] && echo passed || echo FAILED )"
[ $failed = 0 ]
