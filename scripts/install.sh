#!/usr/bin/env bash
# Installs fsmcp for the current user: builds a static, -trimpath binary
# from this checkout, installs it as PREFIX/bin/fsmcp (default
# ~/.local/bin/fsmcp), reports whether ripgrep and the kernel's Landlock
# ABI are what fsmcp needs, and prints client configuration to paste.
#
# usage: scripts/install.sh [--prefix DIR] [--root DIR]
#   --prefix DIR  install into DIR/bin (default: ~/.local)
#   --root DIR    the directory named in the printed client configuration
#                 (default: a placeholder to edit)
#
# It needs go; it writes nothing outside PREFIX/bin and never runs as a
# privileged helper: run it as the user who will run fsmcp.
set -euo pipefail
umask 022

prefix="${HOME}/.local"
root="/path/to/project"
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) [ $# -ge 2 ] || { echo "install.sh: --prefix needs a directory" >&2; exit 2; }; prefix="$2"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    --root) [ $# -ge 2 ] || { echo "install.sh: --root needs a directory" >&2; exit 2; }; root="$2"; shift 2 ;;
    --root=*) root="${1#--root=}"; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

repo="$(cd "$(dirname "$0")/.." && pwd)"
command -v go >/dev/null || { echo "install.sh: go is not on PATH; install Go 1.26.8 or newer" >&2; exit 1; }
case "$prefix" in /*) ;; *) prefix="$(pwd)/$prefix" ;; esac
bin="${prefix}/bin"
mkdir -p "$bin"
# A directory others can write to would let them swap the binary.
if [ -n "$(find "$bin" -maxdepth 0 -perm /022 2>/dev/null)" ]; then
  echo "install.sh: $bin is writable by group or others; refusing to install there" >&2
  exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "building fsmcp from $repo ..."
# Static (no cgo), no build paths in the binary, the module's own
# dependency versions only.
(cd "$repo" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags='-s -w' -o "$tmp/fsmcp" ./cmd/fsmcp)
# Replace atomically: a running fsmcp keeps its old inode.
install -m 0755 "$tmp/fsmcp" "$bin/.fsmcp.new"
mv -f "$bin/.fsmcp.new" "$bin/fsmcp"
echo "installed $bin/fsmcp"
version="$("$bin/fsmcp" --version)"
echo "$version" | sed -n 1p

status=0
if rgpath="$(command -v rg)"; then
  echo "ripgrep: $rgpath ($(rg --version 2>/dev/null | sed -n 1p))"
else
  echo "ripgrep: MISSING - fsmcp refuses to start without it (Debian/Ubuntu: apt install ripgrep), or pass --rg"
  status=1
fi
abi="$(echo "$version" | sed -n 's/^kernel landlock ABI \([0-9]*\)$/\1/p')"
case "$abi" in
  ''|0)
    echo "Landlock ABI 0: this kernel has no Landlock; fsmcp refuses to start (--allow-no-landlock runs with os.Root alone)"
    status=1 ;;
  1|2|3)
    echo "Landlock ABI $abi: filesystem confinement only; TCP bind/connect rules need ABI 4 (Linux 6.7)" ;;
  *)
    echo "Landlock ABI $abi: filesystem and TCP bind/connect rules available" ;;
esac
case ":${PATH}:" in
  *":${bin}:"*) ;;
  *) echo "note: $bin is not on PATH; the configurations below use the full path" ;;
esac

# JSON string escaping for the two characters that need it in a path.
json() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
cmd="$(json "$bin/fsmcp")"
dir="$(json "$root")"

cat <<EOF

== Claude Code (.mcp.json) and other mcpServers clients: mcpServers ==
{
  "mcpServers": {
    "fsmcp": {
      "command": $cmd,
      "args": ["--root", $dir]
    }
  }
}

== Claude Code, from the command line ==
claude mcp add fsmcp -- $(printf '%q' "$bin/fsmcp") --root $(printf '%q' "$root")

== VS Code (.vscode/mcp.json) ==
{
  "servers": {
    "fsmcp": {
      "type": "stdio",
      "command": $cmd,
      "args": ["--root", $dir]
    }
  }
}

Add "--read-only" to args to serve without the write tools. One fsmcp serves one
directory: add one entry per directory. HTTP and systemd: docs/INTEGRATION.md.
EOF
exit "$status"
