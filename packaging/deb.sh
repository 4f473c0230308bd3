#!/usr/bin/env bash
# make deb: tidings_VERSION_ARCH.deb in the repository root, built with dpkg's own tools
# (no debhelper): the `make install` layout under /usr, stripped; /etc/tidings/tidings.toml
# (a conffile) and /etc/tidings/plugins.d/; Depends from dpkg-shlibdeps on the libraries the
# binary links, plus those packaging/debian/control names (loaded at first use: DESIGN §15); with DEB_DEBUG_FILE, tidings-dbgsym_VERSION_ARCH.deb beside it (its debug symbols). Needs VERSION (from the Makefile) and a built `make release man`;
# DEB_COMPRESSION (xz, gzip or none) picks the compression. DEB_WORK (.build/deb) is where the
# tree is staged, DEB_OUT (.) where the package goes; Tests/e2e/test_install_modes.py sets both.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${VERSION:?VERSION must be set (make deb sets it)}"
MAKE=${MAKE:-make}
work=${DEB_WORK:-.build/deb}
root=$work/root

# The changelog says which version is packaged; it must be the one the binary reports.
changelog_version=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
if [ "$changelog_version" != "$VERSION" ]; then
  echo "packaging/debian/changelog is at $changelog_version but tidings is $VERSION: add a changelog entry" >&2
  exit 1
fi

rm -rf "$work"
mkdir -p "$work/debian"
"$MAKE" --no-print-directory -s install DESTDIR="$(realpath -m "$root")" PREFIX=/usr

# Debian policy: stripped binaries, compressed man pages and changelog, a copyright file.
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/tidings"
gzip -9n "$root"/usr/share/man/man1/*.1 "$root"/usr/share/man/man5/*.5
doc=$root/usr/share/doc/tidings
install -m 0644 packaging/debian/copyright "$doc/copyright"
gzip -9n <packaging/debian/changelog >"$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

# The system-wide configuration: the starter `tidings config init --system` writes, with
# an empty plugins.d/ beside it; 0644, as the system service's dynamic user must read it.
"$root/usr/bin/tidings" config init --system --config "$root/etc/tidings/tidings.toml" >/dev/null
chmod 0644 "$root/etc/tidings/tidings.toml"

# DEBIAN/control: fields from packaging/debian/control and the changelog, Depends from the
# ELF's DT_NEEDED libraries (and control's own: libcurl4, and Recommends for the other libraries
# loaded at first use), Installed-Size from the tree.
cp packaging/debian/control packaging/debian/changelog "$work/debian/"
mkdir -p "$root/DEBIAN"
echo /etc/tidings/tidings.toml >"$root/DEBIAN/conffiles"
(
  cd "$work"
  dpkg-shlibdeps -Tdebian/substvars root/usr/bin/tidings
  dpkg-gencontrol -ptidings -Proot -Tdebian/substvars
)

# Owners root:root and sane modes whatever the umask of the build was (files under usr/ have
# theirs from `make install`; Tests/e2e/test_install.py builds the package under umask 077);
# checksums of the files dpkg does not treat as conffiles (for debsums / dpkg --verify).
find "$root" -type d -exec chmod 0755 {} +
(cd "$root" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum >DEBIAN/md5sums)
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums" "$root/DEBIAN/conffiles"
deb=${DEB_OUT:+$DEB_OUT/}tidings_${VERSION}_$(dpkg --print-architecture).deb
# xz by default (the smallest package); the install tests ask for gzip (40 s less of xz -6).
dpkg-deb --root-owner-group "-Z${DEB_COMPRESSION:-xz}" --build "$root" "$deb" >/dev/null

# The debug symbols `make release` kept apart (packaging/split-debug.sh), if given
# (DEB_DEBUG_FILE): tidings-dbgsym as Debian's dh_strip makes it, the file under
# /usr/lib/debug/.build-id/ (where gdb and perf look), for this very build of tidings.
dbg=${DEB_DEBUG_FILE:-}
if [ -n "$dbg" ] && [ -f "$dbg" ]; then
  id=$(readelf -n "$root/usr/bin/tidings" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
  [ -n "$id" ] || { echo "usr/bin/tidings has no build id" >&2; exit 1; }
  droot=$work/dbgsym
  install -d -m 0755 "$droot/DEBIAN" "$droot/usr/lib/debug/.build-id/${id:0:2}" "$droot/usr/share/doc"
  install -m 0644 "$dbg" "$droot/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
  ln -s tidings "$droot/usr/share/doc/tidings-dbgsym"
  arch=$(dpkg --print-architecture)
  cat >"$droot/DEBIAN/control" <<CONTROL
Package: tidings-dbgsym
Source: tidings
Version: $VERSION
Architecture: $arch
Maintainer: $(sed -n 's/^Maintainer: //p' packaging/debian/control)
Installed-Size: $(du -sk "$droot/usr" | cut -f1)
Depends: tidings (= $VERSION)
Section: debug
Priority: optional
Auto-Built-Package: debug-symbols
Build-Ids: $id
Description: debug symbols for tidings
CONTROL
  (cd "$droot" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum >DEBIAN/md5sums)
  chmod 0644 "$droot/DEBIAN/control" "$droot/DEBIAN/md5sums"
  dbgdeb=${DEB_OUT:+$DEB_OUT/}tidings-dbgsym_${VERSION}_$arch.deb
  dpkg-deb --root-owner-group "-Z${DEB_COMPRESSION:-xz}" --build "$droot" "$dbgdeb" >/dev/null
  echo "$dbgdeb"
fi
# The package itself last: the install tests read its name from the last line.
echo "$deb"
