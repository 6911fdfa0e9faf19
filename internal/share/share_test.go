package share

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestBounds: an identity stops at its own bound without touching
// another's places; past the total every identity is refused; a place
// given back (twice: once counts) is taken again.
func TestBounds(t *testing.T) {
	l := New("test_places", "places", 2, 3, prometheus.NewRegistry())
	a1, w := l.Take("a")
	if w != None {
		t.Fatal(w)
	}
	if _, w := l.Take("a"); w != None {
		t.Fatal(w)
	}
	if r, w := l.Take("a"); w != PerIdentity || r != nil {
		t.Fatalf("a's third place: %v, want PerIdentity", w)
	}
	if _, w := l.Take("b"); w != None {
		t.Fatalf("b's first place beside a at its bound: %v", w)
	}
	if _, w := l.Take("c"); w != Total {
		t.Fatalf("c's first place with 3 taken: %v, want Total", w)
	}
	a1()
	a1()
	if mine, all := l.Held("a"); mine != 1 || all != 2 {
		t.Fatalf("held: a %d, all %d; want 1, 2", mine, all)
	}
	if _, w := l.Take("c"); w != None {
		t.Fatalf("c after a gave one back: %v", w)
	}
	if got := testutil.ToFloat64(l.refused.WithLabelValues("per_identity")) + 10*testutil.ToFloat64(l.refused.WithLabelValues("total")); got != 11 {
		t.Errorf("refusals: %v, want 1 per identity and 1 total", got)
	}
	if got := testutil.ToFloat64(l.held); got != 3 {
		t.Errorf("held gauge %v, want 3", got)
	}
}
