package frontend

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	fsmcpv1 "github.com/fsmcp/fsmcp/proto/gen/fsmcp/v1"
)

// appendTime writes what time.Format writes with timeLayout, for every
// time an int64 of nanoseconds holds.
func TestListTimeFormat(t *testing.T) {
	cases := []int64{0, 1, -1, 999_999_999, -999_999_999, 1_000_000_000, -1_000_000_000,
		1764590000_123456789, 253402300799_999999999 / 1000, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		cases = append(cases, int64(r.Uint64()))
	}
	for _, ns := range cases {
		want := time.Unix(0, ns).UTC().Format(timeLayout)
		if got := string(appendTime([]byte("x"), ns)); got != "x"+want {
			t.Fatalf("appendTime(%d) = %q, want %q", ns, got[1:], want)
		}
	}
}

// appendEntry writes what the name and entryFields builders write, for
// every type, UTF-8 and other names, and every mode bit.
func TestListEntryRendering(t *testing.T) {
	names := [][]byte{[]byte("a.txt"), []byte("quote\"back\\slash\ttab\x01"), []byte("bad\xff\xfe"), []byte("é日本")}
	for tp := range fsmcpv1.FileType_name {
		for _, name := range names {
			for _, mode := range []uint32{0, 0o644, 0o7777, 0o4755, 0o100644} {
				e := &fsmcpv1.Entry{Name: name, Type: fsmcpv1.FileType(tp), Size: int64(tp) * 4099, MtimeUnixNano: 1764590000_123456789, Mode: mode}
				want := string(entryFields(newObj().name("name", e.GetName()), e).bytes())
				if got := string(appendEntry(nil, e.Name, e.Type, e.Size, e.MtimeUnixNano, e.Mode)); got != want {
					t.Errorf("appendEntry = %s, want %s", got, want)
				}
			}
		}
	}
}
