package snapshot_test

import (
	"bytes"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/evidence"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/snapshot"
	"github.com/baristahq/barista/snapshot/scenario"
)

// recorded runs a replay script and returns its log as a source.
func recorded(t *testing.T, path string) (*snapshot.MemorySource, *scenario.Machine) {
	t.Helper()
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	m := scenario.NewMachine()
	m.Record = true
	var out bytes.Buffer
	if _, err := scenario.Run(in, m, &out, scenario.Options{}); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, out.String())
	}
	return &snapshot.MemorySource{New: func() *fsm.FSM { return fsm.NewAtLevel(scenario.DefaultLevel) }, Entries: m.Entries}, m
}

const fiveTiers = "../testdata/scenarios/five-tiers-wrong-estimates.txt"

// TestStatementOfTheFairnessWorkload: the statement of each tenant of the
// fairness report's workload over its whole log has the CPU, runs and
// shares its script's header derives by hand, waits that are the
// dispatch times (every job was submitted at 0), and the bytes replay
// gives again; statements of two halves add up to the whole.
func TestStatementOfTheFairnessWorkload(t *testing.T) {
	src, m := recorded(t, fiveTiers)
	want := map[string]struct {
		cpu, runs int64
		billed    string
		entitled  string
	}{
		"free": {12000, 12, "0.032967", "0.032258"}, "bronze": {24000, 12, "0.065934", "0.064516"}, "silver": {48000, 16, "0.131868", "0.129032"},
		"gold": {92000, 46, "0.252747", "0.258065"}, "diamond": {188000, 47, "0.516484", "0.516129"},
	}
	// The dispatch times of each tenant's jobs, from the events.
	var assigned []fsm.Event
	m.F.Events(0, func(ev *fsm.Event) bool {
		if ev.Kind == fsm.EvAssigned {
			assigned = append(assigned, *ev)
		}
		return true
	})
	waits := map[string][]int64{}
	m.F.Read(func(s *sfq.Scheduler) {
		for _, ev := range assigned {
			waits[s.TenantName(ev.Tenant)] = append(waits[s.TenantName(ev.Tenant)], int64(ev.At))
		}
	})
	for name, w := range want {
		st, err := snapshot.Statement(src, name, snapshot.WindowSpec{})
		if err != nil {
			t.Fatal(err)
		}
		if st.Window.FromIndex != 1 || st.Window.ToIndex != uint64(len(src.Entries)) || !st.Window.Open || st.Window.ToMs != 183_000 {
			t.Errorf("%s: window %+v", name, st.Window)
		}
		if st.CPUMs != w.cpu || st.Runs.OK != uint64(w.runs) || st.Runs.Total() != uint64(w.runs) || len(st.CPU) != 1 || st.CPU[0].Pool != "default" ||
			st.CPU[0].Size != "md" || st.CPU[0].Class != "normal" {
			t.Errorf("%s: cpu %d runs %+v rows %+v, want %d and %d ok", name, st.CPUMs, st.Runs, st.CPU, w.cpu, w.runs)
		}
		ws := waits[name]
		slices.Sort(ws)
		rank := func(q float64) int64 { return ws[int(math.Ceil(q*float64(len(ws))))-1] }
		if wt := st.Waiting; wt.Dispatches != uint64(len(ws)) || wt.P50Ms != rank(0.5) || wt.P95Ms != rank(0.95) || wt.MaxMs != ws[len(ws)-1] {
			t.Errorf("%s: waiting %+v, want %d dispatches p50 %d p95 %d max %d", name, wt, len(ws), rank(0.5), rank(0.95), ws[len(ws)-1])
		}
		if len(st.Shares) != 1 || st.Shares[0].Billed == nil || st.Shares[0].Entitled == nil {
			t.Fatalf("%s: shares %+v", name, st.Shares)
		}
		sh := st.Shares[0]
		if got := fixed(sh.Billed); got != w.billed || fixed(sh.Entitled) != w.entitled || sh.BilledMs != w.cpu || sh.ClassBilledMs != 364_000 {
			t.Errorf("%s: billed %s entitled %s (%d of %d), want %s %s", name, got, fixed(sh.Entitled), sh.BilledMs, sh.ClassBilledMs, w.billed, w.entitled)
		}
		again, _ := snapshot.Statement(src, name, snapshot.WindowSpec{})
		if !bytes.Equal(st.JSON(), again.JSON()) || !bytes.Equal(st.CSV(), again.CSV()) {
			t.Errorf("%s: two replays give different bytes", name)
		}
		// Two halves by index add up to the whole.
		half := uint64(len(src.Entries) / 2)
		a, err1 := snapshot.Statement(src, name, snapshot.WindowSpec{FromIndex: 1, ToIndex: half})
		b, err2 := snapshot.Statement(src, name, snapshot.WindowSpec{FromIndex: half + 1})
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if a.Window.Open || a.Window.ToIndex != half || b.Window.FromIndex != half+1 || a.Window.EndHash != b.Window.StartHash {
			t.Errorf("%s: halves %+v and %+v", name, a.Window, b.Window)
		}
		if a.CPUMs+b.CPUMs != st.CPUMs || a.Runs.Total()+b.Runs.Total() != st.Runs.Total() || a.Waiting.Dispatches+b.Waiting.Dispatches != st.Waiting.Dispatches {
			t.Errorf("%s: halves %d+%d ms, %d+%d runs, whole %d, %d", name, a.CPUMs, b.CPUMs, a.Runs.Total(), b.Runs.Total(), st.CPUMs, st.Runs.Total())
		}
	}
	// By cluster time: the first minute holds the dispatches before 60 s.
	st, err := snapshot.Statement(src, "diamond", snapshot.WindowSpec{ByTime: true, FromMs: 0, ToMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, at := range waits["diamond"] {
		if at < 60_000 {
			n++
		}
	}
	if st.Window.Open || st.Window.FromMs != 0 || st.Window.ToMs != 60_000 || st.Waiting.Dispatches != uint64(n) {
		t.Errorf("first minute: window %+v, %d dispatches, want %d", st.Window, st.Waiting.Dispatches, n)
	}
}

func fixed(f *evidence.Fixed) string {
	if f == nil {
		return "null"
	}
	b, _ := f.MarshalJSON()
	return string(b)
}

// TestCertificateOfTheFairnessWorkload: each tenant's certificate over
// the workload verifies, names every dispatch while it had a candidate,
// and fails once two of its lines are swapped or a key is edited.
func TestCertificateOfTheFairnessWorkload(t *testing.T) {
	src, _ := recorded(t, fiveTiers)
	for _, name := range []string{"free", "gold", "diamond"} {
		cert, err := snapshot.Certificate(src, name, snapshot.WindowSpec{})
		if err != nil {
			t.Fatal(err)
		}
		rep := evidence.Verify(cert)
		if !rep.OK() || rep.Lines < 100 {
			t.Fatalf("%s: %d lines, failures %+v", name, rep.Lines, rep.Failures)
		}
		self, others := 0, map[string]bool{}
		for _, l := range cert.Lines {
			if l.Chosen.Tenant == evidence.Self {
				self++
			} else {
				others[l.Chosen.Tenant] = true
			}
		}
		if len(others) != 4 {
			t.Errorf("%s: other tenants %v, want 4 opaque names", name, others)
		}
		parsed, err := evidence.ParseCertificate(cert.JSON())
		if err != nil || !evidence.Verify(parsed).OK() {
			t.Fatalf("%s: the document does not verify again: %v", name, err)
		}
		swapped := *parsed
		swapped.Lines = slices.Clone(parsed.Lines)
		swapped.Lines[3], swapped.Lines[4] = swapped.Lines[4], swapped.Lines[3]
		if evidence.Verify(&swapped).OK() {
			t.Errorf("%s: a certificate with two lines swapped verifies", name)
		}
		edited := *parsed
		edited.Lines = slices.Clone(parsed.Lines)
		edited.Lines[5].Chosen.Start = "1"
		if evidence.Verify(&edited).OK() {
			t.Errorf("%s: a certificate with an edited key verifies", name)
		}
	}
}

// TestCertificateEndsBeforeAPolicyChange: a certificate states one steal
// policy; its window ends before the entry that changes it.
func TestCertificateEndsBeforeAPolicyChange(t *testing.T) {
	path := t.TempDir() + "/policy.txt"
	script := "at 0s\ntenant a tier=gold\ntenant b tier=free\nsubmit a x2 size=md cost=1s\nsubmit b x2 size=md cost=1s\n" +
		"at 1s\ndispatch md\ndispatch md\nat 2s\nconfig policy=reserve:500ms\ndispatch md\n"
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	src, _ := recorded(t, path)
	cert, err := snapshot.Certificate(src, "b", snapshot.WindowSpec{})
	if err != nil {
		t.Fatal(err)
	}
	// Entries: 2 tenants, 4 submits, 2 dispatches, then the config.
	if cert.Window.ToIndex != 8 || cert.Window.Open || cert.Policy != "prefer-fit" || len(cert.Lines) != 2 || !evidence.Verify(cert).OK() {
		t.Errorf("window %+v, policy %s, %d lines", cert.Window, cert.Policy, len(cert.Lines))
	}
	after, err := snapshot.Certificate(src, "b", snapshot.WindowSpec{FromIndex: 10})
	if err != nil || after.Policy != "reserve" || after.MarginUs != 500_000 || len(after.Lines) != 1 {
		t.Errorf("after the change: %v %+v", err, after)
	}
}
