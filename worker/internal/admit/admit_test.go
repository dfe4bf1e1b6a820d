package admit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// More than the capacity is refused at once; a full Limiter refuses after
// its queue timeout, or with the caller's context error when that ends
// first; a release lets the next call in.
func TestLimiter(t *testing.T) {
	l := New("slots", 2, 20*time.Millisecond)
	var big *TooLargeError
	if _, err := l.Acquire(context.Background(), 3); !errors.As(err, &big) || big.Capacity != 2 {
		t.Fatalf("Acquire(3 of 2) = %v, want a TooLargeError", err)
	}
	release, err := l.Acquire(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	var busy *BusyError
	if _, err := l.Acquire(context.Background(), 1); !errors.As(err, &busy) {
		t.Fatalf("Acquire(full) = %v, want a BusyError", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire(full, cancelled) = %v, want %v", err, context.Canceled)
	}
	release()
	if r, err := l.Acquire(context.Background(), 2); err != nil {
		t.Fatalf("Acquire after release = %v", err)
	} else {
		r()
	}
}
