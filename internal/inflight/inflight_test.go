package inflight

import (
	"context"
	"testing"
	"time"
)

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

// TestReserveWait: a reservation a bound refuses waits for bytes to be
// given back and takes them; one still refused when nothing was given
// back for its progress window, when its wait ends or when its context
// ends, is refused, naming the bound, and changes nothing.
func TestReserveWait(t *testing.T) {
	b := New("test", 100, 0, nil)
	r1, _ := b.Reserve("a", 100)
	got := make(chan Which, 1)
	go func() {
		r, w := b.ReserveWait(context.Background(), "a", 100, time.Minute, time.Minute)
		if r != nil {
			r() // before the answer: the test reserves again once it has it
		}
		got <- w
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case w := <-got:
		t.Fatalf("took the bytes while held: %v", w)
	default:
	}
	r1()
	if w := <-got; w != None {
		t.Fatalf("after the release: %v", w)
	}

	r2, _ := b.Reserve("a", 100)
	defer r2()
	if _, w := b.ReserveWait(context.Background(), "a", 100, 30*time.Millisecond, time.Minute); w != PerIdentity {
		t.Fatalf("never released: %v", w)
	}
	if _, w := b.ReserveWait(context.Background(), "a", 100, time.Minute, 30*time.Millisecond); w != PerIdentity {
		t.Fatalf("never released, a short wait: %v", w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, w := b.ReserveWait(ctx, "a", 100, time.Minute, time.Minute); w != PerIdentity {
		t.Fatalf("a cancelled wait: %v", w)
	}
	if mine, all := b.Held("a"); mine != 100 || all != 100 {
		t.Fatalf("held %d of %d after the refusals, want 100", mine, all)
	}
}
