package sfq

import (
	"testing"

	"pgregory.net/rapid"
)

// Canonical lives: every live or requeued job is at attempt 1 on worker w1.
func canonicalLives() map[State]Life {
	return map[State]Life{
		Queued:    {State: Queued, Attempt: 1, MaxAttempts: 3},
		Assigned:  {State: Assigned, Attempt: 1, MaxAttempts: 3, Worker: "w1", AckDeadline: 500},
		Running:   {State: Running, Attempt: 1, MaxAttempts: 3, Worker: "w1", LeaseExpires: 600, TimeoutAt: 700},
		Completed: {State: Completed, Attempt: 1, MaxAttempts: 3, Settled: 1},
		Failed:    {State: Failed, Attempt: 1, Failures: 3, MaxAttempts: 3, Settled: 1},
		Cancelled: {State: Cancelled, Attempt: 1, MaxAttempts: 3, Cancel: CancelRequested},
		TimedOut:  {State: TimedOut, Attempt: 1, MaxAttempts: 3, Cancel: CancelTimeout},
	}
}

// Canonical events: attempt 1, worker w1, at 1000 ms (every deadline due).
func canonicalEvents() map[EventKind]Event {
	return map[EventKind]Event{
		EvDispatch:      {Kind: EvDispatch, Worker: "w2", Now: 1000, AckMs: 10_000},
		EvStart:         {Kind: EvStart, Attempt: 1, Worker: "w1", Now: 1000, LeaseMs: 30_000, TimeoutMs: 60_000},
		EvHeartbeat:     {Kind: EvHeartbeat, Attempt: 1, Worker: "w1", Now: 1000, LeaseMs: 30_000},
		EvFinish:        {Kind: EvFinish, Attempt: 1, Worker: "w1", Now: 1000, Outcome: OutcomeOK},
		EvCancel:        {Kind: EvCancel, Now: 1000},
		EvExpireAck:     {Kind: EvExpireAck, Attempt: 1, Now: 1000},
		EvExpireLease:   {Kind: EvExpireLease, Attempt: 1, Now: 1000},
		EvExpireTimeout: {Kind: EvExpireTimeout, Attempt: 1, Now: 1000},
		EvGrant:         {Kind: EvGrant, Now: 1000, LeaseMs: 30_000},
	}
}

type cell struct {
	out   Outcome
	state State
}

// TestLifecycleMatrix applies every event kind to every state and checks
// the outcome and the resulting state.
func TestLifecycleMatrix(t *testing.T) {
	Q, A, R, C, F, X, T := Queued, Assigned, Running, Completed, Failed, Cancelled, TimedOut
	want := map[State]map[EventKind]cell{
		Q: {EvDispatch: {Changed, A}, EvStart: {Stale, Q}, EvHeartbeat: {Stale, Q}, EvFinish: {Zombie, Q}, EvCancel: {Changed, X},
			EvExpireAck: {Stale, Q}, EvExpireLease: {Stale, Q}, EvExpireTimeout: {Stale, Q}, EvGrant: {Invalid, Q}},
		A: {EvDispatch: {Invalid, A}, EvStart: {Changed, R}, EvHeartbeat: {Changed, R}, EvFinish: {Changed, C}, EvCancel: {Changed, A},
			EvExpireAck: {Changed, Q}, EvExpireLease: {Stale, A}, EvExpireTimeout: {Stale, A}, EvGrant: {Changed, A}},
		R: {EvDispatch: {Invalid, R}, EvStart: {Duplicate, R}, EvHeartbeat: {Changed, R}, EvFinish: {Changed, C}, EvCancel: {Changed, R},
			EvExpireAck: {Stale, R}, EvExpireLease: {Changed, Q}, EvExpireTimeout: {Changed, R}, EvGrant: {Changed, R}},
		C: {EvDispatch: {Invalid, C}, EvStart: {Stale, C}, EvHeartbeat: {Stale, C}, EvFinish: {Duplicate, C}, EvCancel: {Invalid, C},
			EvExpireAck: {Stale, C}, EvExpireLease: {Stale, C}, EvExpireTimeout: {Stale, C}, EvGrant: {Invalid, C}},
		F: {EvDispatch: {Invalid, F}, EvStart: {Stale, F}, EvHeartbeat: {Stale, F}, EvFinish: {Duplicate, F}, EvCancel: {Invalid, F},
			EvExpireAck: {Stale, F}, EvExpireLease: {Stale, F}, EvExpireTimeout: {Stale, F}, EvGrant: {Invalid, F}},
		X: {EvDispatch: {Invalid, X}, EvStart: {Stale, X}, EvHeartbeat: {Stale, X}, EvFinish: {Zombie, X}, EvCancel: {Duplicate, X},
			EvExpireAck: {Stale, X}, EvExpireLease: {Stale, X}, EvExpireTimeout: {Stale, X}, EvGrant: {Invalid, X}},
		T: {EvDispatch: {Invalid, T}, EvStart: {Stale, T}, EvHeartbeat: {Stale, T}, EvFinish: {Zombie, T}, EvCancel: {Invalid, T},
			EvExpireAck: {Stale, T}, EvExpireLease: {Stale, T}, EvExpireTimeout: {Stale, T}, EvGrant: {Invalid, T}},
	}
	lives, events := canonicalLives(), canonicalEvents()
	for s := Queued; s < numStates; s++ {
		for k := EvDispatch; k < numEventKinds; k++ {
			w, ok := want[s][k]
			if !ok {
				t.Fatalf("matrix has no cell for %s × %s", s, k)
			}
			got, out := Apply(lives[s], events[k])
			if out != w.out || got.State != w.state {
				t.Errorf("%s × %s: got %s → %s, want %s → %s", s, k, out, got.State, w.out, w.state)
			}
			if out != Changed && out != Zombie && got != lives[s] {
				t.Errorf("%s × %s: %s changed the life: %+v", s, k, out, got)
			}
		}
	}
}

// TestLifecycleDetails covers the variants the matrix does not: fencing,
// deadlines, retries, cancels and the Settled mask.
func TestLifecycleDetails(t *testing.T) {
	L := canonicalLives()
	E := canonicalEvents()
	with := func(l Life, f func(*Life)) Life { f(&l); return l }
	ev := func(k EventKind, f func(*Event)) Event { e := E[k]; f(&e); return e }

	cases := []struct {
		name  string
		life  Life
		event Event
		out   Outcome
		check func(t *testing.T, l Life)
	}{
		{"dispatch numbers the attempt and sets the ack deadline", L[Queued], E[EvDispatch], Changed, func(t *testing.T, l Life) {
			if l.Attempt != 2 || l.Worker != "w2" || l.AckDeadline != 11_000 || l.Failures != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"dispatch shifts the settled mask", with(L[Queued], func(l *Life) { l.Settled = 1 }), E[EvDispatch], Changed, func(t *testing.T, l Life) {
			if l.Settled != 2 {
				t.Errorf("settled %b", l.Settled)
			}
		}},
		{"start sets lease and timeout, clears ack", L[Assigned], E[EvStart], Changed, func(t *testing.T, l Life) {
			if l.LeaseExpires != 31_000 || l.TimeoutAt != 61_000 || l.AckDeadline != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"start without job timeout", L[Assigned], ev(EvStart, func(e *Event) { e.TimeoutMs = 0 }), Changed, func(t *testing.T, l Life) {
			if l.TimeoutAt != 0 {
				t.Errorf("timeout %d", l.TimeoutAt)
			}
		}},
		{"start from another worker is fenced", L[Assigned], ev(EvStart, func(e *Event) { e.Worker = "w9" }), Stale, nil},
		{"start of another attempt is fenced", L[Assigned], ev(EvStart, func(e *Event) { e.Attempt = 2 }), Stale, nil},
		{"heartbeat moves the lease", L[Running], E[EvHeartbeat], Changed, func(t *testing.T, l Life) {
			if l.LeaseExpires != 31_000 {
				t.Errorf("lease %d", l.LeaseExpires)
			}
		}},
		{"heartbeat that does not move the lease is a duplicate", with(L[Running], func(l *Life) { l.LeaseExpires = 31_000 }), E[EvHeartbeat], Duplicate, nil},
		{"heartbeat from another worker is fenced", L[Running], ev(EvHeartbeat, func(e *Event) { e.Worker = "w9" }), Stale, nil},
		{"finish ok beats a pending cancel", with(L[Running], func(l *Life) { l.Cancel = CancelRequested }), E[EvFinish], Changed, func(t *testing.T, l Life) {
			if l.State != Completed || l.Settled != 1 || l.Worker != "w1" || l.LeaseExpires != 0 || l.TimeoutAt != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"finish failed requeues and counts", L[Running], ev(EvFinish, func(e *Event) { e.Outcome = OutcomeFailed }), Changed, func(t *testing.T, l Life) {
			if l.State != Queued || l.Failures != 1 || l.Worker != "" || l.LeaseExpires != 0 || l.Settled != 1 || l.Attempt != 1 {
				t.Errorf("%+v", l)
			}
		}},
		{"finish failed at max attempts fails", with(L[Running], func(l *Life) { l.Failures = 2 }), ev(EvFinish, func(e *Event) { e.Outcome = OutcomeFailed }), Changed, func(t *testing.T, l Life) {
			if l.State != Failed || l.Failures != 3 || l.Worker != "w1" {
				t.Errorf("%+v", l)
			}
		}},
		{"finish failed with a cancel pending cancels", with(L[Running], func(l *Life) { l.Cancel = CancelRequested }), ev(EvFinish, func(e *Event) { e.Outcome = OutcomeFailed }), Changed, func(t *testing.T, l Life) {
			if l.State != Cancelled || l.Failures != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"finish cancelled confirms a cancel", with(L[Running], func(l *Life) { l.Cancel = CancelRequested }), ev(EvFinish, func(e *Event) { e.Outcome = OutcomeCancelled }), Changed, func(t *testing.T, l Life) {
			if l.State != Cancelled {
				t.Errorf("%+v", l)
			}
		}},
		{"finish cancelled confirms a timeout", with(L[Running], func(l *Life) { l.Cancel = CancelTimeout }), ev(EvFinish, func(e *Event) { e.Outcome = OutcomeCancelled }), Changed, func(t *testing.T, l Life) {
			if l.State != TimedOut {
				t.Errorf("%+v", l)
			}
		}},
		{"finish cancelled without a request is a failed run", L[Running], ev(EvFinish, func(e *Event) { e.Outcome = OutcomeCancelled }), Changed, func(t *testing.T, l Life) {
			if l.State != Queued || l.Failures != 1 {
				t.Errorf("%+v", l)
			}
		}},
		{"finish from an assigned job completes it", L[Assigned], E[EvFinish], Changed, func(t *testing.T, l Life) {
			if l.State != Completed {
				t.Errorf("%+v", l)
			}
		}},
		{"finish of the live attempt from another worker is fenced, not billed", L[Running], ev(EvFinish, func(e *Event) { e.Worker = "w9" }), Stale, nil},
		{"finish of a future attempt is fenced", L[Running], ev(EvFinish, func(e *Event) { e.Attempt = 2 }), Stale, nil},
		{"finish of attempt 0 is fenced", L[Running], ev(EvFinish, func(e *Event) { e.Attempt = 0 }), Stale, nil},
		{"repeat of an accepted finish after a requeue is a duplicate", with(L[Queued], func(l *Life) { l.Settled = 1; l.Failures = 1 }), ev(EvFinish, func(e *Event) { e.Outcome = OutcomeFailed }), Duplicate, nil},
		{"repeat of an accepted finish of an older attempt is a duplicate", with(L[Running], func(l *Life) { l.Attempt = 2; l.Settled = 2 }), E[EvFinish], Duplicate, nil},
		{"first finish of an older attempt is a zombie", with(L[Running], func(l *Life) { l.Attempt = 2 }), E[EvFinish], Zombie, func(t *testing.T, l Life) {
			if l.Settled != 2 || l.State != Running || l.Attempt != 2 {
				t.Errorf("%+v", l)
			}
		}},
		{"a zombie is billed once", with(L[Running], func(l *Life) { l.Attempt = 2; l.Settled = 2 }), ev(EvFinish, func(e *Event) { e.Worker = "old" }), Duplicate, nil},
		{"a finish 32 attempts back is too old to bill", with(L[Running], func(l *Life) { l.Attempt = 33 }), E[EvFinish], Stale, nil},
		{"a finish 31 attempts back is still billed", with(L[Running], func(l *Life) { l.Attempt = 32 }), E[EvFinish], Zombie, nil},
		{"cancel of a live job with a cancel pending is a duplicate", with(L[Running], func(l *Life) { l.Cancel = CancelTimeout }), E[EvCancel], Duplicate, func(t *testing.T, l Life) {
			if l.Cancel != CancelTimeout {
				t.Errorf("%+v", l)
			}
		}},
		{"cancel of a fresh queued job", Life{State: Queued, MaxAttempts: 3}, E[EvCancel], Changed, func(t *testing.T, l Life) {
			if l.State != Cancelled || l.Cancel != CancelRequested {
				t.Errorf("%+v", l)
			}
		}},
		{"ack expiry is not a failure", L[Assigned], E[EvExpireAck], Changed, func(t *testing.T, l Life) {
			if l.State != Queued || l.Failures != 0 || l.Worker != "" || l.AckDeadline != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"ack expiry before the deadline", L[Assigned], ev(EvExpireAck, func(e *Event) { e.Now = 499 }), NotDue, nil},
		{"ack expiry of another attempt", L[Assigned], ev(EvExpireAck, func(e *Event) { e.Attempt = 2 }), Stale, nil},
		{"ack expiry with a cancel pending cancels", with(L[Assigned], func(l *Life) { l.Cancel = CancelRequested }), E[EvExpireAck], Changed, func(t *testing.T, l Life) {
			if l.State != Cancelled || l.Worker != "w1" || l.AckDeadline != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"ack expiry with a timeout pending times out", with(L[Assigned], func(l *Life) { l.Cancel = CancelTimeout }), E[EvExpireAck], Changed, func(t *testing.T, l Life) {
			if l.State != TimedOut {
				t.Errorf("%+v", l)
			}
		}},
		{"lease expiry counts a failure", L[Running], E[EvExpireLease], Changed, func(t *testing.T, l Life) {
			if l.State != Queued || l.Failures != 1 {
				t.Errorf("%+v", l)
			}
		}},
		{"lease expiry at max attempts fails", with(L[Running], func(l *Life) { l.Failures = 2 }), E[EvExpireLease], Changed, func(t *testing.T, l Life) {
			if l.State != Failed {
				t.Errorf("%+v", l)
			}
		}},
		{"lease expiry with a cancel pending cancels", with(L[Running], func(l *Life) { l.Cancel = CancelRequested }), E[EvExpireLease], Changed, func(t *testing.T, l Life) {
			if l.State != Cancelled || l.Failures != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"lease expiry with a timeout pending times out, never retried", with(L[Running], func(l *Life) { l.Cancel = CancelTimeout }), E[EvExpireLease], Changed, func(t *testing.T, l Life) {
			if l.State != TimedOut {
				t.Errorf("%+v", l)
			}
		}},
		{"lease expiry exactly at the deadline", L[Running], ev(EvExpireLease, func(e *Event) { e.Now = 600 }), Changed, nil},
		{"lease expiry before the deadline", L[Running], ev(EvExpireLease, func(e *Event) { e.Now = 599 }), NotDue, nil},
		{"timeout sets a timeout cancel", L[Running], E[EvExpireTimeout], Changed, func(t *testing.T, l Life) {
			if l.Cancel != CancelTimeout || l.State != Running {
				t.Errorf("%+v", l)
			}
		}},
		{"timeout before it is due", L[Running], ev(EvExpireTimeout, func(e *Event) { e.Now = 699 }), NotDue, nil},
		{"timeout with a cancel already pending", with(L[Running], func(l *Life) { l.Cancel = CancelRequested }), E[EvExpireTimeout], Duplicate, nil},
		{"timeout of a job without one", with(L[Running], func(l *Life) { l.TimeoutAt = 0 }), E[EvExpireTimeout], Stale, nil},
		{"grant raises every deadline", L[Running], E[EvGrant], Changed, func(t *testing.T, l Life) {
			if l.LeaseExpires != 31_000 || l.TimeoutAt != 31_000 || l.AckDeadline != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"grant never shortens a deadline", with(L[Running], func(l *Life) { l.LeaseExpires = 90_000; l.TimeoutAt = 95_000 }), E[EvGrant], Duplicate, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, out := Apply(c.life, c.event)
			if out != c.out {
				t.Fatalf("outcome %s, want %s (life %+v)", out, c.out, got)
			}
			if out != Changed && out != Zombie && got != c.life {
				t.Fatalf("%s changed the life: %+v", out, got)
			}
			if c.check != nil {
				c.check(t, got)
			}
		})
	}
}

// TestApplyTotal feeds arbitrary lives and events to Apply: it never
// panics, only Changed and Zombie change the life, a Zombie changes only the
// Settled mask, and applying an accepted event twice is never Changed twice
// for the same effect (start, finish, cancel, expiries are idempotent).
func TestApplyTotal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := Life{
			State:        State(rapid.IntRange(int(Queued), int(numStates)-1).Draw(t, "state")),
			Cancel:       CancelReason(rapid.IntRange(0, 2).Draw(t, "cancel")),
			Attempt:      uint32(rapid.IntRange(0, 70).Draw(t, "attempt")),
			Failures:     uint16(rapid.IntRange(0, 3).Draw(t, "failures")),
			MaxAttempts:  uint16(rapid.IntRange(1, 4).Draw(t, "max")),
			Settled:      rapid.Uint32().Draw(t, "settled"),
			Worker:       rapid.SampledFrom([]string{"", "w1", "w2"}).Draw(t, "worker"),
			AckDeadline:  Time(rapid.Int64Range(0, 2000).Draw(t, "ack")),
			LeaseExpires: Time(rapid.Int64Range(0, 2000).Draw(t, "lease")),
			TimeoutAt:    Time(rapid.Int64Range(0, 2000).Draw(t, "timeout")),
		}
		e := Event{
			Kind:      EventKind(rapid.IntRange(0, int(numEventKinds)).Draw(t, "kind")),
			Attempt:   uint32(rapid.IntRange(0, 70).Draw(t, "eattempt")),
			Worker:    rapid.SampledFrom([]string{"", "w1", "w2"}).Draw(t, "eworker"),
			Now:       Time(rapid.Int64Range(0, 2000).Draw(t, "now")),
			Outcome:   FinishOutcome(rapid.IntRange(1, 3).Draw(t, "outcome")),
			AckMs:     rapid.Int64Range(1, 100).Draw(t, "ackms"),
			LeaseMs:   rapid.Int64Range(1, 100).Draw(t, "leasems"),
			TimeoutMs: rapid.Int64Range(0, 100).Draw(t, "timeoutms"),
		}
		got, out := Apply(l, e)
		switch out {
		case Changed:
		case Zombie:
			want := l
			want.Settled = got.Settled
			if got != want || got.Settled == l.Settled {
				t.Fatalf("zombie changed more than the mask: %+v -> %+v", l, got)
			}
		case Duplicate, Stale, NotDue, Invalid:
			if got != l {
				t.Fatalf("%s changed the life: %+v -> %+v", out, l, got)
			}
		default:
			t.Fatalf("unknown outcome %d", out)
		}
		if l.Failures < l.MaxAttempts && got.Failures > got.MaxAttempts {
			t.Fatalf("failures %d over max %d", got.Failures, got.MaxAttempts)
		}
		// A live job has a worker, a queued one none; a job that ends
		// keeps the worker it ended on.
		wellFormed := (!l.State.Live() || l.Worker != "") && (l.State != Queued || l.Worker == "") && (e.Kind != EvDispatch || e.Worker != "")
		if wellFormed && out == Changed {
			switch {
			case got.State.Live() && got.Worker == "", got.State == Queued && got.Worker != "":
				t.Fatalf("%s with worker %q after %s", got.State, got.Worker, e.Kind)
			case got.State.Terminal() && !l.State.Terminal() && got.Worker != l.Worker:
				t.Fatalf("%s -> %s on %s: worker %q, want %q kept", l.State, got.State, e.Kind, got.Worker, l.Worker)
			}
		}
		if e.Kind != EvDispatch && e.Kind != EvHeartbeat && e.Kind != EvGrant && out == Changed {
			if again, out2 := Apply(got, e); out2 == Changed && again.State == got.State && e.Kind != EvFinish {
				t.Fatalf("%s applied twice changed twice: %+v -> %+v", e.Kind, got, again)
			}
		}
	})
}
