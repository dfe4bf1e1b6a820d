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
command -v diff >/dev/null || missing+=(diffutils)
command -v systemd-socket-activate >/dev/null || missing+=(systemd)
command -v chromium >/dev/null || missing+=(chromium)
command -v mkfs.xfs >/dev/null || missing+=(xfsprogs)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test.sh: install ${missing[*]} first" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

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
