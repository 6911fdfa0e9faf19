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
		// A delayed job never dispatched, and one that expired so.
		Scheduled: {State: Scheduled, MaxAttempts: 3},
		Expired:   {State: Expired, MaxAttempts: 3},
	}
}

// Canonical events: attempt 1, worker w1, at 1000 ms (every deadline due).
func canonicalEvents() map[InputKind]Input {
	return map[InputKind]Input{
		InDispatch:      {Kind: InDispatch, Worker: "w2", Now: 1000, AckMs: 10_000},
		InStart:         {Kind: InStart, Attempt: 1, Worker: "w1", Now: 1000, LeaseMs: 30_000, TimeoutMs: 60_000},
		InHeartbeat:     {Kind: InHeartbeat, Attempt: 1, Worker: "w1", Now: 1000, LeaseMs: 30_000},
		InFinish:        {Kind: InFinish, Attempt: 1, Worker: "w1", Now: 1000, Outcome: OutcomeOK},
		InCancel:        {Kind: InCancel, Now: 1000},
		InExpireAck:     {Kind: InExpireAck, Attempt: 1, Now: 1000},
		InExpireLease:   {Kind: InExpireLease, Attempt: 1, Now: 1000},
		InExpireTimeout: {Kind: InExpireTimeout, Attempt: 1, Now: 1000},
		InGrant:         {Kind: InGrant, Now: 1000, LeaseMs: 30_000},
		InRelease:       {Kind: InRelease, Now: 1000, Due: 1000},
		InExpireTTL:     {Kind: InExpireTTL, Now: 1000, Due: 1000},
		InRedrive:       {Kind: InRedrive, Now: 1000},
		InLose:          {Kind: InLose, Attempt: 1, Worker: "w1", Now: 1000},
	}
}

type cell struct {
	out   Outcome
	state State
}

// TestLifecycleMatrix applies every event kind to every state and checks
// the outcome and the resulting state.
func TestLifecycleMatrix(t *testing.T) {
	Q, A, R, C, F, X, T, S, E := Queued, Assigned, Running, Completed, Failed, Cancelled, TimedOut, Scheduled, Expired
	want := map[State]map[InputKind]cell{
		S: {InDispatch: {Invalid, S}, InStart: {Stale, S}, InHeartbeat: {Stale, S}, InFinish: {Stale, S}, InCancel: {Changed, X},
			InExpireAck: {Stale, S}, InExpireLease: {Stale, S}, InExpireTimeout: {Stale, S}, InGrant: {Invalid, S}, InRelease: {Changed, Q}, InExpireTTL: {Changed, E}, InRedrive: {Invalid, S}, InLose: {Stale, S}},
		E: {InDispatch: {Invalid, E}, InStart: {Stale, E}, InHeartbeat: {Stale, E}, InFinish: {Stale, E}, InCancel: {Invalid, E},
			InExpireAck: {Stale, E}, InExpireLease: {Stale, E}, InExpireTimeout: {Stale, E}, InGrant: {Invalid, E}, InRelease: {Invalid, E}, InExpireTTL: {Invalid, E}, InRedrive: {Changed, Q}, InLose: {Stale, E}},
		Q: {InDispatch: {Changed, A}, InStart: {Stale, Q}, InHeartbeat: {Stale, Q}, InFinish: {Zombie, Q}, InCancel: {Changed, X},
			InExpireAck: {Stale, Q}, InExpireLease: {Stale, Q}, InExpireTimeout: {Stale, Q}, InGrant: {Invalid, Q}, InRelease: {Invalid, Q}, InExpireTTL: {Invalid, Q}, InRedrive: {Invalid, Q}, InLose: {Stale, Q}},
		A: {InDispatch: {Invalid, A}, InStart: {Changed, R}, InHeartbeat: {Changed, R}, InFinish: {Changed, C}, InCancel: {Changed, A},
			InExpireAck: {Changed, Q}, InExpireLease: {Stale, A}, InExpireTimeout: {Stale, A}, InGrant: {Changed, A}, InRelease: {Invalid, A}, InExpireTTL: {Invalid, A}, InRedrive: {Invalid, A}, InLose: {Changed, Q}},
		R: {InDispatch: {Invalid, R}, InStart: {Duplicate, R}, InHeartbeat: {Changed, R}, InFinish: {Changed, C}, InCancel: {Changed, R},
			InExpireAck: {Stale, R}, InExpireLease: {Changed, Q}, InExpireTimeout: {Changed, R}, InGrant: {Changed, R}, InRelease: {Invalid, R}, InExpireTTL: {Invalid, R}, InRedrive: {Invalid, R}, InLose: {Changed, Q}},
		C: {InDispatch: {Invalid, C}, InStart: {Stale, C}, InHeartbeat: {Stale, C}, InFinish: {Duplicate, C}, InCancel: {Invalid, C},
			InExpireAck: {Stale, C}, InExpireLease: {Stale, C}, InExpireTimeout: {Stale, C}, InGrant: {Invalid, C}, InRelease: {Invalid, C}, InExpireTTL: {Invalid, C}, InRedrive: {Invalid, C}, InLose: {Stale, C}},
		F: {InDispatch: {Invalid, F}, InStart: {Stale, F}, InHeartbeat: {Stale, F}, InFinish: {Duplicate, F}, InCancel: {Invalid, F},
			InExpireAck: {Stale, F}, InExpireLease: {Stale, F}, InExpireTimeout: {Stale, F}, InGrant: {Invalid, F}, InRelease: {Invalid, F}, InExpireTTL: {Invalid, F}, InRedrive: {Changed, Q}, InLose: {Stale, F}},
		X: {InDispatch: {Invalid, X}, InStart: {Stale, X}, InHeartbeat: {Stale, X}, InFinish: {Zombie, X}, InCancel: {Duplicate, X},
			InExpireAck: {Stale, X}, InExpireLease: {Stale, X}, InExpireTimeout: {Stale, X}, InGrant: {Invalid, X}, InRelease: {Invalid, X}, InExpireTTL: {Invalid, X}, InRedrive: {Changed, Q}, InLose: {Stale, X}},
		T: {InDispatch: {Invalid, T}, InStart: {Stale, T}, InHeartbeat: {Stale, T}, InFinish: {Zombie, T}, InCancel: {Invalid, T},
			InExpireAck: {Stale, T}, InExpireLease: {Stale, T}, InExpireTimeout: {Stale, T}, InGrant: {Invalid, T}, InRelease: {Invalid, T}, InExpireTTL: {Invalid, T}, InRedrive: {Changed, Q}, InLose: {Stale, T}},
	}
	lives, events := canonicalLives(), canonicalEvents()
	for s := Queued; s < numStates; s++ {
		for k := InDispatch; k < numInputKinds; k++ {
			w, ok := want[s][k]
			if !ok {
				t.Fatalf("matrix has no cell for %s × %s", s, k)
			}
			got, out := Step(lives[s], events[k])
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
	ev := func(k InputKind, f func(*Input)) Input { e := E[k]; f(&e); return e }

	cases := []struct {
		name  string
		life  Life
		event Input
		out   Outcome
		check func(t *testing.T, l Life)
	}{
		{"dispatch numbers the attempt and sets the ack deadline", L[Queued], E[InDispatch], Changed, func(t *testing.T, l Life) {
			if l.Attempt != 2 || l.Worker != "w2" || l.AckDeadline != 11_000 || l.Failures != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"dispatch shifts the settled mask", with(L[Queued], func(l *Life) { l.Settled = 1 }), E[InDispatch], Changed, func(t *testing.T, l Life) {
			if l.Settled != 2 {
				t.Errorf("settled %b", l.Settled)
			}
		}},
		{"start sets lease and timeout, clears ack", L[Assigned], E[InStart], Changed, func(t *testing.T, l Life) {
			if l.LeaseExpires != 31_000 || l.TimeoutAt != 61_000 || l.AckDeadline != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"start without job timeout", L[Assigned], ev(InStart, func(e *Input) { e.TimeoutMs = 0 }), Changed, func(t *testing.T, l Life) {
			if l.TimeoutAt != 0 {
				t.Errorf("timeout %d", l.TimeoutAt)
			}
		}},
		{"start from another worker is fenced", L[Assigned], ev(InStart, func(e *Input) { e.Worker = "w9" }), Stale, nil},
		{"start of another attempt is fenced", L[Assigned], ev(InStart, func(e *Input) { e.Attempt = 2 }), Stale, nil},
		{"heartbeat moves the lease", L[Running], E[InHeartbeat], Changed, func(t *testing.T, l Life) {
			if l.LeaseExpires != 31_000 {
				t.Errorf("lease %d", l.LeaseExpires)
			}
		}},
		{"heartbeat that does not move the lease is a duplicate", with(L[Running], func(l *Life) { l.LeaseExpires = 31_000 }), E[InHeartbeat], Duplicate, nil},
		{"heartbeat from another worker is fenced", L[Running], ev(InHeartbeat, func(e *Input) { e.Worker = "w9" }), Stale, nil},
		{"finish ok beats a pending cancel", with(L[Running], func(l *Life) { l.Cancel = CancelRequested }), E[InFinish], Changed, func(t *testing.T, l Life) {
			if l.State != Completed || l.Settled != 1 || l.Worker != "w1" || l.LeaseExpires != 0 || l.TimeoutAt != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"finish failed requeues and counts", L[Running], ev(InFinish, func(e *Input) { e.Outcome = OutcomeFailed }), Changed, func(t *testing.T, l Life) {
			if l.State != Queued || l.Failures != 1 || l.Worker != "" || l.LeaseExpires != 0 || l.Settled != 1 || l.Attempt != 1 {
				t.Errorf("%+v", l)
			}
		}},
		{"finish failed at max attempts fails", with(L[Running], func(l *Life) { l.Failures = 2 }), ev(InFinish, func(e *Input) { e.Outcome = OutcomeFailed }), Changed, func(t *testing.T, l Life) {
			if l.State != Failed || l.Failures != 3 || l.Worker != "w1" {
				t.Errorf("%+v", l)
			}
		}},
		{"finish failed with a cancel pending cancels", with(L[Running], func(l *Life) { l.Cancel = CancelRequested }), ev(InFinish, func(e *Input) { e.Outcome = OutcomeFailed }), Changed, func(t *testing.T, l Life) {
			if l.State != Cancelled || l.Failures != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"finish cancelled confirms a cancel", with(L[Running], func(l *Life) { l.Cancel = CancelRequested }), ev(InFinish, func(e *Input) { e.Outcome = OutcomeCancelled }), Changed, func(t *testing.T, l Life) {
			if l.State != Cancelled {
				t.Errorf("%+v", l)
			}
		}},
		{"finish cancelled confirms a timeout", with(L[Running], func(l *Life) { l.Cancel = CancelTimeout }), ev(InFinish, func(e *Input) { e.Outcome = OutcomeCancelled }), Changed, func(t *testing.T, l Life) {
			if l.State != TimedOut {
				t.Errorf("%+v", l)
			}
		}},
		{"finish cancelled without a request is a failed run", L[Running], ev(InFinish, func(e *Input) { e.Outcome = OutcomeCancelled }), Changed, func(t *testing.T, l Life) {
			if l.State != Queued || l.Failures != 1 {
				t.Errorf("%+v", l)
			}
		}},
		{"finish from an assigned job completes it", L[Assigned], E[InFinish], Changed, func(t *testing.T, l Life) {
			if l.State != Completed {
				t.Errorf("%+v", l)
			}
		}},
		{"finish of the live attempt from another worker is fenced, not billed", L[Running], ev(InFinish, func(e *Input) { e.Worker = "w9" }), Stale, nil},
		{"finish of a future attempt is fenced", L[Running], ev(InFinish, func(e *Input) { e.Attempt = 2 }), Stale, nil},
		{"finish of attempt 0 is fenced", L[Running], ev(InFinish, func(e *Input) { e.Attempt = 0 }), Stale, nil},
		{"repeat of an accepted finish after a requeue is a duplicate", with(L[Queued], func(l *Life) { l.Settled = 1; l.Failures = 1 }), ev(InFinish, func(e *Input) { e.Outcome = OutcomeFailed }), Duplicate, nil},
		{"repeat of an accepted finish of an older attempt is a duplicate", with(L[Running], func(l *Life) { l.Attempt = 2; l.Settled = 2 }), E[InFinish], Duplicate, nil},
		{"first finish of an older attempt is a zombie", with(L[Running], func(l *Life) { l.Attempt = 2 }), E[InFinish], Zombie, func(t *testing.T, l Life) {
			if l.Settled != 2 || l.State != Running || l.Attempt != 2 {
				t.Errorf("%+v", l)
			}
		}},
		{"a zombie is billed once", with(L[Running], func(l *Life) { l.Attempt = 2; l.Settled = 2 }), ev(InFinish, func(e *Input) { e.Worker = "old" }), Duplicate, nil},
		{"a finish 32 attempts back is too old to bill", with(L[Running], func(l *Life) { l.Attempt = 33 }), E[InFinish], Stale, nil},
		{"a finish 31 attempts back is still billed", with(L[Running], func(l *Life) { l.Attempt = 32 }), E[InFinish], Zombie, nil},
		{"cancel of a live job with a cancel pending is a duplicate", with(L[Running], func(l *Life) { l.Cancel = CancelTimeout }), E[InCancel], Duplicate, func(t *testing.T, l Life) {
			if l.Cancel != CancelTimeout {
				t.Errorf("%+v", l)
			}
		}},
		{"cancel of a fresh queued job", Life{State: Queued, MaxAttempts: 3}, E[InCancel], Changed, func(t *testing.T, l Life) {
			if l.State != Cancelled || l.Cancel != CancelRequested {
				t.Errorf("%+v", l)
			}
		}},
		{"ack expiry is not a failure", L[Assigned], E[InExpireAck], Changed, func(t *testing.T, l Life) {
			if l.State != Queued || l.Failures != 0 || l.Worker != "" || l.AckDeadline != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"ack expiry before the deadline", L[Assigned], ev(InExpireAck, func(e *Input) { e.Now = 499 }), NotDue, nil},
		{"ack expiry of another attempt", L[Assigned], ev(InExpireAck, func(e *Input) { e.Attempt = 2 }), Stale, nil},
		{"ack expiry with a cancel pending cancels", with(L[Assigned], func(l *Life) { l.Cancel = CancelRequested }), E[InExpireAck], Changed, func(t *testing.T, l Life) {
			if l.State != Cancelled || l.Worker != "w1" || l.AckDeadline != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"ack expiry with a timeout pending times out", with(L[Assigned], func(l *Life) { l.Cancel = CancelTimeout }), E[InExpireAck], Changed, func(t *testing.T, l Life) {
			if l.State != TimedOut {
				t.Errorf("%+v", l)
			}
		}},
		{"lease expiry counts a failure", L[Running], E[InExpireLease], Changed, func(t *testing.T, l Life) {
			if l.State != Queued || l.Failures != 1 {
				t.Errorf("%+v", l)
			}
		}},
		{"lease expiry at max attempts fails", with(L[Running], func(l *Life) { l.Failures = 2 }), E[InExpireLease], Changed, func(t *testing.T, l Life) {
			if l.State != Failed {
				t.Errorf("%+v", l)
			}
		}},
		{"lease expiry with a cancel pending cancels", with(L[Running], func(l *Life) { l.Cancel = CancelRequested }), E[InExpireLease], Changed, func(t *testing.T, l Life) {
			if l.State != Cancelled || l.Failures != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"lease expiry with a timeout pending times out, never retried", with(L[Running], func(l *Life) { l.Cancel = CancelTimeout }), E[InExpireLease], Changed, func(t *testing.T, l Life) {
			if l.State != TimedOut {
				t.Errorf("%+v", l)
			}
		}},
		{"lease expiry exactly at the deadline", L[Running], ev(InExpireLease, func(e *Input) { e.Now = 600 }), Changed, nil},
		{"lease expiry before the deadline", L[Running], ev(InExpireLease, func(e *Input) { e.Now = 599 }), NotDue, nil},
		{"timeout sets a timeout cancel", L[Running], E[InExpireTimeout], Changed, func(t *testing.T, l Life) {
			if l.Cancel != CancelTimeout || l.State != Running {
				t.Errorf("%+v", l)
			}
		}},
		{"timeout before it is due", L[Running], ev(InExpireTimeout, func(e *Input) { e.Now = 699 }), NotDue, nil},
		{"timeout with a cancel already pending", with(L[Running], func(l *Life) { l.Cancel = CancelRequested }), E[InExpireTimeout], Duplicate, nil},
		{"timeout of a job without one", with(L[Running], func(l *Life) { l.TimeoutAt = 0 }), E[InExpireTimeout], Stale, nil},
		{"grant raises every deadline", L[Running], E[InGrant], Changed, func(t *testing.T, l Life) {
			if l.LeaseExpires != 31_000 || l.TimeoutAt != 31_000 || l.AckDeadline != 0 {
				t.Errorf("%+v", l)
			}
		}},
		{"grant never shortens a deadline", with(L[Running], func(l *Life) { l.LeaseExpires = 90_000; l.TimeoutAt = 95_000 }), E[InGrant], Duplicate, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, out := Step(c.life, c.event)
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
		e := Input{
			Kind:      InputKind(rapid.IntRange(0, int(numInputKinds)).Draw(t, "kind")),
			Attempt:   uint32(rapid.IntRange(0, 70).Draw(t, "eattempt")),
			Worker:    rapid.SampledFrom([]string{"", "w1", "w2"}).Draw(t, "eworker"),
			Now:       Time(rapid.Int64Range(0, 2000).Draw(t, "now")),
			Outcome:   FinishOutcome(rapid.IntRange(1, 3).Draw(t, "outcome")),
			AckMs:     rapid.Int64Range(1, 100).Draw(t, "ackms"),
			LeaseMs:   rapid.Int64Range(1, 100).Draw(t, "leasems"),
			TimeoutMs: rapid.Int64Range(0, 100).Draw(t, "timeoutms"),
		}
		got, out := Step(l, e)
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
		wellFormed := (!l.State.Live() || l.Worker != "") && (l.State != Queued || l.Worker == "") && (e.Kind != InDispatch || e.Worker != "")
		if wellFormed && out == Changed {
			switch {
			case got.State.Live() && got.Worker == "", got.State == Queued && got.Worker != "":
				t.Fatalf("%s with worker %q after %s", got.State, got.Worker, e.Kind)
			case got.State.Terminal() && !l.State.Terminal() && got.Worker != l.Worker:
				t.Fatalf("%s -> %s on %s: worker %q, want %q kept", l.State, got.State, e.Kind, got.Worker, l.Worker)
			}
		}
		if e.Kind != InDispatch && e.Kind != InHeartbeat && e.Kind != InGrant && out == Changed {
			if again, out2 := Step(got, e); out2 == Changed && again.State == got.State && e.Kind != InFinish {
				t.Fatalf("%s applied twice changed twice: %+v -> %+v", e.Kind, got, again)
			}
		}
	})
}
