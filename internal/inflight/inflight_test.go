package inflight

import "testing"

// TestReserve: reservations count per identity and in all; one that
// would pass a bound is refused, naming it, and changes nothing; a
// lone request larger than a bound still passes (it could never be
// served otherwise); release gives the bytes back once.
func TestReserve(t *testing.T) {
	b := New("test", 100, 150, nil)
	r1, w := b.Reserve("a", 60)
	if w != None {
		t.Fatal(w)
	}
	if _, w := b.Reserve("a", 50); w != PerIdentity {
		t.Fatalf("a's 110 bytes: %v", w)
	}
	r2, w := b.Reserve("b", 80)
	if w != None {
		t.Fatal(w)
	}
	if _, w := b.Reserve("c", 20); w != Total {
		t.Fatalf("160 bytes in all: %v", w)
	}
	if mine, all := b.Held("a"); mine != 60 || all != 140 {
		t.Fatalf("held %d of %d", mine, all)
	}
	r1()
	r1()
	if mine, all := b.Held("a"); mine != 0 || all != 80 {
		t.Fatalf("after release: held %d of %d", mine, all)
	}
	r2()
	big, w := b.Reserve("a", 1000) // alone: passes
	if w != None {
		t.Fatalf("a lone large request: %v", w)
	}
	if _, w := b.Reserve("b", 1); w != Total {
		t.Fatalf("beside it: %v", w)
	}
	big()
	if _, all := b.Held(""); all != 0 {
		t.Fatalf("left %d", all)
	}
}
