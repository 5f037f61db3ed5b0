#!/usr/bin/env bash
# Fetches a real C project's source, Debian's zlib source package, into
# $1 (a cache directory) through a private apt configuration (deb-src of
# Debian bookworm), unless it is there already. Prints the path of the
# upstream tarball.
set -euo pipefail
cache=$1
tarball=$cache/zlib_1.2.13.dfsg.orig.tar.bz2
if [ ! -s "$tarball" ]; then
    mkdir -p "$cache/apt/lists/partial" "$cache/apt/cache/archives/partial"
    echo "deb-src http://deb.debian.org/debian bookworm main" > "$cache/apt/sources.list"
    apt=(apt-get -qq -o "Dir::Etc::SourceList=$cache/apt/sources.list"
        -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$cache/apt/lists"
        -o "Dir::Cache=$cache/apt/cache" -o APT::Sandbox::User=root)
    "${apt[@]}" update >&2
    (cd "$cache" && "${apt[@]}" source --download-only zlib=1:1.2.13.dfsg-1 >&2)
fi
echo "$tarball"
