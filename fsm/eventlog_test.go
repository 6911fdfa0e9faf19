package fsm

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/baristahq/barista/sfq"
	"pgregory.net/rapid"
)

// drawEvent draws an event with values from small to the extremes, so
// that differences from a block's base wrap around.
func drawEvent(t *rapid.T) eventRecord {
	return eventRecord{
		Job:      sfq.JobID(rapid.OneOf(rapid.Uint64Range(0, 5000), rapid.Uint64()).Draw(t, "job")),
		At:       sfq.Time(rapid.OneOf(rapid.Int64Range(0, 1e6), rapid.Int64()).Draw(t, "at")),
		CPUMs:    rapid.OneOf(rapid.Just(int64(0)), rapid.Int64()).Draw(t, "cpu"),
		Worker:   rapid.OneOf(rapid.Just(""), rapid.StringN(0, 40, -1), rapid.Just(strings.Repeat("w", 5000))).Draw(t, "worker"),
		Tenant:   rapid.Uint32().Draw(t, "tenant"),
		Attempt:  rapid.OneOf(rapid.Just(uint32(0)), rapid.Uint32()).Draw(t, "attempt"),
		wall:     sfq.WallDelta(rapid.Int32().Draw(t, "wall")),
		ExitCode: rapid.Int16().Draw(t, "exit"),
		Kind:     EventKind(rapid.IntRange(1, int(numEventKinds)-1).Draw(t, "kind")),
		Reason:   Reason(rapid.IntRange(0, int(numReasons)-1).Draw(t, "reason")),
	}
}

type seqEvent struct {
	seq uint64
	ev  eventRecord
}

func collect(v eventView, from uint64) []seqEvent {
	var out []seqEvent
	v.Each(from, func(seq uint64, ev *eventRecord) bool {
		out = append(out, seqEvent{seq, *ev})
		return true
	})
	return out
}

// TestEventLogProperty: appends and prunes in any order give back every
// retained event exactly, from any seq, forwards and backwards; a view
// taken earlier reads what it held then, however the log changed since.
func TestEventLogProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var l eventLog
		var ref []seqEvent
		next := rapid.Uint64Range(1, math.MaxUint64/2).Draw(t, "first")
		type held struct {
			v    eventView
			want []seqEvent
		}
		var views []held
		for i, n := 0, rapid.IntRange(1, 2000).Draw(t, "ops"); i < n; i++ {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 7:
				ev := drawEvent(t)
				if !l.Append(next, &ev) {
					t.Fatalf("append %d refused", next)
				}
				ref = append(ref, seqEvent{next, ev})
				next++
			case op < 9:
				l.PopHead()
				if len(ref) > 0 {
					ref = ref[1:]
				}
			default:
				views = append(views, held{l.Freeze(), slices.Clone(ref)})
			}
			if l.Len() != len(ref) {
				t.Fatalf("len %d, want %d", l.Len(), len(ref))
			}
			seq, ev, ok := l.Head()
			if ok != (len(ref) > 0) || ok && (seq != ref[0].seq || ev != ref[0].ev) {
				t.Fatalf("head %d %+v %v, want %+v", seq, ev, ok, ref)
			}
		}
		if len(ref) > 0 && l.Append(next+1, &eventRecord{Kind: EvQueued}) {
			t.Fatalf("a gap was appended")
		}
		v := l.View()
		if got := collect(v, 0); !slices.Equal(got, ref) {
			t.Fatalf("each: got %d events, want %d", len(got), len(ref))
		}
		if len(ref) > 0 {
			k := rapid.IntRange(0, len(ref)-1).Draw(t, "from")
			if got := collect(v, ref[k].seq); !slices.Equal(got, ref[k:]) {
				t.Fatalf("each from %d: got %d events, want %d", ref[k].seq, len(got), len(ref)-k)
			}
			if got, ok := l.Get(ref[k].seq); !ok || got != ref[k].ev {
				t.Fatalf("get %d: %+v %v", ref[k].seq, got, ok)
			}
			if v.last() != ref[len(ref)-1].seq || v.first() != ref[0].seq {
				t.Fatalf("first %d last %d", v.first(), v.last())
			}
			if _, ok := l.Get(ref[0].seq - 1); ok {
				t.Fatalf("a pruned event was found")
			}
		}
		var back []seqEvent
		v.EachBack(func(seq uint64, ev *eventRecord) bool {
			back = append(back, seqEvent{seq, *ev})
			return true
		})
		slices.Reverse(back)
		if !slices.Equal(back, ref) {
			t.Fatalf("each back: got %d events, want %d", len(back), len(ref))
		}
		for i, h := range views {
			if got := collect(h.v, 0); !slices.Equal(got, h.want) {
				t.Fatalf("view %d changed: got %d events, want %d", i, len(got), len(h.want))
			}
		}
	})
}

// TestEventLogViewWhileWriting: a frozen view is read by another goroutine
// while the log appends and prunes (run under -race).
func TestEventLogViewWhileWriting(t *testing.T) {
	var l eventLog
	seq := uint64(1)
	add := func(n int) {
		for i := 0; i < n; i++ {
			ev := eventRecord{Job: sfq.JobID(seq), At: sfq.Time(seq * 3), Tenant: uint32(seq % 7), Kind: EvQueued, Worker: fmt.Sprint("w", seq%5)}
			l.Append(seq, &ev)
			seq++
		}
	}
	add(5000)
	for round := 0; round < 5; round++ {
		v := l.Freeze()
		want := v.Len()
		var wg sync.WaitGroup
		wg.Add(1)
		got := 0
		go func() {
			defer wg.Done()
			v.Each(0, func(s uint64, ev *eventRecord) bool {
				if uint64(ev.Job) != s || ev.At != sfq.Time(s*3) {
					panic(fmt.Sprintf("event %d reads %+v", s, ev))
				}
				got++
				return true
			})
		}()
		add(3000)
		for i := 0; i < 2500; i++ {
			l.PopHead()
		}
		wg.Wait()
		if got != want {
			t.Fatalf("round %d: the view read %d events, want %d", round, got, want)
		}
	}
}

// TestEventSizeMatchesRecord: skipping a record steps over exactly the
// bytes decoding it reads, for any event.
func TestEventSizeMatchesRecord(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := drawEvent(t)
		blk := &eventBlock{job: base.Job, at: base.At}
		ev := drawEvent(t)
		b := appendEvent(nil, blk, &ev)
		got, n := readEvent(b, blk)
		if got != ev || n != len(b) || eventSize(b) != len(b) {
			t.Fatalf("record of %d bytes: read %d, skipped %d, %+v", len(b), n, eventSize(b), got)
		}
	})
}
