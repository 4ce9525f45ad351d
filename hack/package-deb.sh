#!/usr/bin/env bash
# The hardshift Debian package (amd64), with dpkg-deb: no packaging tool to build.
#
#   hack/package-deb.sh [--bin-dir DIR] [--out DIR] [--fast]
#
# Packs /usr/bin/hardshift and, beside it, /usr/bin/hardshift-agent (`create` embeds the agent it
# finds next to its own executable), the collector's unit hardshift-collector.service with its
# settings /etc/hardshift/collector.env (a conffile), the maintainer scripts (the hardshift user),
# the docs, and the shell completions and man pages when this hardshift can write them.
# Prints the path of OUT/hardshift_<version>_amd64.deb (OUT defaults to target/debian).
#   --bin-dir DIR  package DIR/hardshift and DIR/hardshift-agent as built (the tests give their
#                  debug build); by default, build the CLI with `cargo build --release` and the
#                  agent with its own profile (`--profile agent`: whole-program optimised, small)
#   --fast         gzip -1 instead of xz (the tests: xz takes minutes on a large debug binary)
# Needs dpkg-dev (dpkg-shlibdeps) and binutils (strip); both come with hack/setup.sh --tests.
set -euo pipefail
bin_dir="" out="" compress=(-Zxz)
# Paths given are the caller's, resolved before moving to the repository.
while [ $# -gt 0 ]; do
  case $1 in
    --bin-dir) bin_dir=$(realpath -m "${2:?--bin-dir DIR}"); shift 2 ;;
    --out) out=$(realpath -m "${2:?--out DIR}"); shift 2 ;;
    --fast) compress=(-Zgzip -z1); shift ;;
    *) echo "usage: hack/package-deb.sh [--bin-dir DIR] [--out DIR] [--fast]" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
# Where cargo puts what it builds (CARGO_TARGET_DIR honoured).
T=$(hack/target-dir.sh)
REPO=$PWD
SRC=$REPO/deploy/debian
out=${out:-$T/debian}
log() { echo "package-deb: $*" >&2; }

declare -A from
if [ -z "$bin_dir" ]; then
  cargo build --release --locked -p hardshift >&2
  cargo build --profile agent --locked -p hardshift-agent >&2
  from=([hardshift]=$T/release/hardshift [hardshift-agent]=$T/agent/hardshift-agent)
else
  from=([hardshift]=$bin_dir/hardshift [hardshift-agent]=$bin_dir/hardshift-agent)
fi
for b in hardshift hardshift-agent; do
  [ -x "${from[$b]}" ] || { log "${from[$b]}: no such executable (build it, or give --bin-dir DIR)"; exit 2; }
done

# The version is the workspace's; the binary must say the same (never pack a stale build).
version=$(awk '/^\[workspace.package\]/ {w=1; next} /^\[/ {w=0} w && /^version *=/ {gsub(/[" ]/, "", $0); sub(/^version=/, ""); print; exit}' Cargo.toml)
[ -n "$version" ] || { log "Cargo.toml: no version in [workspace.package]"; exit 1; }
said=$("${from[hardshift]}" --version | head -1)
case "$said " in
  "hardshift $version "*) ;;
  *) log "${from[hardshift]} says \"$said\", the workspace is $version: rebuild it"; exit 1 ;;
esac

MAINTAINER=${DEB_MAINTAINER:-hardshift maintainers <maintainers@users.noreply.a-seed-5c1acdc5.example>}
# Reproducible: every date is the last commit's (or SOURCE_DATE_EPOCH when given).
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# dpkg-shlibdeps wants the debhelper layout: debian/control, the package's tree in debian/<name>.
pkg=$work/debian/hardshift
doc=$pkg/usr/share/doc/hardshift
mkdir -p "$pkg/DEBIAN" "$pkg/usr/bin" "$doc"

# The programs, stripped as dh_strip would. create finds the agent beside /usr/bin/hardshift.
for b in hardshift hardshift-agent; do
  install -m 0755 "${from[$b]}" "$pkg/usr/bin/$b"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$pkg/usr/bin/$b"
done

# The collector's unit and its settings.
install -D -m 0644 "$SRC/hardshift-collector.service" "$pkg/lib/systemd/system/hardshift-collector.service"
install -D -m 0644 "$SRC/collector.env" "$pkg/etc/hardshift/collector.env"
echo /etc/hardshift/collector.env > "$pkg/DEBIAN/conffiles"
for s in postinst prerm postrm; do install -m 0755 "$SRC/$s" "$pkg/DEBIAN/$s"; done

# Docs: README.md and docs/ keep their relative links; the changelog is compressed, as policy asks.
install -m 0644 "$SRC/copyright" "$doc/copyright"
install -m 0644 README.md "$doc/README.md"
mkdir -p "$doc/docs"
install -m 0644 docs/*.md "$doc/docs/"
printf 'hardshift (%s) bookworm; urgency=medium\n\n  * Built from commit %s by hack/package-deb.sh.\n\n -- %s  %s\n' \
  "$version" "$commit" "$MAINTAINER" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")" | gzip -9n > "$doc/changelog.gz"
install -D -m 0644 "$SRC/lintian-overrides" "$pkg/usr/share/lintian/overrides/hardshift"

# Completions and man pages, from clap, when this hardshift has the commands.
hs=$pkg/usr/bin/hardshift
if "$hs" completions --help >/dev/null 2>&1; then
  install -d "$pkg/usr/share/bash-completion/completions" "$pkg/usr/share/zsh/vendor-completions" \
    "$pkg/usr/share/fish/vendor_completions.d"
  "$hs" completions bash > "$pkg/usr/share/bash-completion/completions/hardshift"
  "$hs" completions zsh > "$pkg/usr/share/zsh/vendor-completions/_hardshift"
  "$hs" completions fish > "$pkg/usr/share/fish/vendor_completions.d/hardshift.fish"
  chmod 0644 "$pkg"/usr/share/{bash-completion/completions,zsh/vendor-completions,fish/vendor_completions.d}/*
else
  log "note: this hardshift has no \`completions\` command: the package has no shell completions"
fi
if "$hs" man --help >/dev/null 2>&1; then
  "$hs" man --out "$work/man" >&2
  while IFS= read -r -d '' page; do
    section=${page##*.}
    install -D -m 0644 "$page" "$pkg/usr/share/man/man$section/${page##*/}"
    gzip -9n "$pkg/usr/share/man/man$section/${page##*/}"
  done < <(find "$work/man" -type f -name '*.[1-8]' -print0)
else
  log "note: this hardshift has no \`man\` command: the package has no man pages"
  printf '\n# This build of hardshift has no `man` command to write its pages (hack/package-deb.sh said so).\nhardshift: no-manual-page [usr/bin/hardshift]\n' \
    >> "$pkg/usr/share/lintian/overrides/hardshift"
fi

# The control file: the shared libraries' packages from dpkg-shlibdeps, adduser for postinst.
printf 'Source: hardshift\n\nPackage: hardshift\nArchitecture: amd64\n' > "$work/debian/control"
shlibs=$(cd "$work" && dpkg-shlibdeps -O "debian/hardshift/usr/bin/hardshift" "debian/hardshift/usr/bin/hardshift-agent" \
  | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { log "dpkg-shlibdeps named no dependency"; exit 1; }
installed_kib=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
cat > "$pkg/DEBIAN/control" <<EOF
Package: hardshift
Version: $version
Architecture: amd64
Maintainer: $MAINTAINER
Installed-Size: $installed_kib
Depends: $shlibs, adduser
Section: admin
Priority: optional
Description: air-gapped OpenShift install bundles, and a collector to watch the install
 hardshift writes, offline, everything a user-provisioned OpenShift 4 install
 needs (the PKI, one Ignition config per node, static IPs, mirror registries,
 the lab's DNS, DHCP, HAProxy and PXE configs) and checks it.
 .
 On every node, hardshift-agent streams kubelet, CRI-O, etcd and host health
 over mTLS to the collector (hardshift-collector.service here), which stores
 every report and serves a dashboard and Prometheus metrics; status, diagnose
 and logs say why a node is stuck.
EOF
(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$pkg/DEBIAN/md5sums"
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/md5sums" "$pkg/DEBIAN/conffiles"
find "$pkg" -type d -exec chmod 0755 {} +
find "$pkg" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$out"
deb=$out/hardshift_${version}_amd64.deb
dpkg-deb --root-owner-group "${compress[@]}" --build "$pkg" "$deb.tmp" >&2
mv -f "$deb.tmp" "$deb"
log "wrote $deb ($(du -h "$deb" | cut -f1))"
echo "$deb"
