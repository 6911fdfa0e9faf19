package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"barista/fsm"
	"barista/sfq"
	"barista/snapshot/scenario"
)

// v1StateHash is the state hash the build of snapshot format 1 reported for
// testdata/upgrade-v1.snap (the SHA-256 of its state part).
const v1StateHash = "22a3fb7a595b15af46c6904f37ee8c509b0d2a8ad380b434f707bbe4995b7949"

// TestUpgradeFromV1: a snapshot written by format 1 loads into the current
// build as the same state the same commands build today, and both go on
// alike.
func TestUpgradeFromV1(t *testing.T) {
	raw, err := os.ReadFile("testdata/upgrade-v1.snap")
	if err != nil {
		t.Fatal(err)
	}
	if raw[len(magic)] != 1 {
		t.Fatalf("fixture is format %d, want 1", raw[len(magic)])
	}
	// The fixture is what the old build wrote: its state part hashes to
	// the hash that build reported (header: magic, version 1, index 31).
	state := raw[len(magic)+2 : len(raw)-sha256.Size]
	if sum := sha256.Sum256(state); hex.EncodeToString(sum[:]) != v1StateHash {
		t.Fatalf("fixture state hash %x, want %s", sum, v1StateHash)
	}

	loaded := fsm.New()
	index, err := Read(bytes.NewReader(raw), loaded)
	if err != nil {
		t.Fatalf("reading a format 1 snapshot: %v", err)
	}
	if index != 31 {
		t.Fatalf("index %d, want 31", index)
	}

	replayed := scenario.NewMachine()
	script, err := os.Open("testdata/upgrade-v1.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer script.Close()
	if _, err := scenario.Run(script, replayed, io.Discard, scenario.Options{}); err != nil {
		t.Fatal(err)
	}
	h1, _ := loaded.Hash()
	h2, _ := replayed.F.Hash()
	if h1 != h2 {
		t.Fatalf("a format 1 snapshot loads to state %x, the same commands build %x", h1, h2)
	}

	// Both go on alike, with the features format 1 did not have.
	more := "at 50s\ntenant gold max_class=critical deadlines=on\nsubmit gold size=md cost=1s class=critical\n" +
		"submit gold size=sm cost=1s deadline=10s\ndispatch md worker=u1\ndispatch md worker=u2\ndispatch md worker=u3\nfinish 1 cpu=1s\nshow job 1\nshow tenant gold class=critical\n"
	var out1, out2 bytes.Buffer
	on := &scenario.Machine{F: loaded}
	scenario.Run(strings.NewReader(more), on, &out1, scenario.Options{})
	scenario.Run(strings.NewReader(more), replayed, &out2, scenario.Options{})
	// (The hash lines differ: the two machines numbered their dispatch
	// credits differently.)
	if strings.Split(out1.String(), "hash=")[0] != strings.Split(out2.String(), "hash=")[0] {
		t.Fatalf("after the upgrade:\n%s\nreplayed:\n%s", out1.String(), out2.String())
	}
	if !strings.Contains(out1.String(), "dispatch 1 tenant=gold job=10 size=md") {
		t.Fatalf("the critical job did not go first:\n%s", out1.String())
	}

	// A format 1 snapshot read and written again is in today's format.
	v, err := loaded.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Write(&buf, v); err != nil {
		t.Fatal(err)
	}
	if got := buf.Bytes()[len(magic)]; got != FormatVersion {
		t.Fatalf("rewritten snapshot is format %d", got)
	}
	again := fsm.New()
	if _, err := Read(&buf, again); err != nil {
		t.Fatal(err)
	}
	if a, b := again.Hash(); a != func() [32]byte { h, _ := loaded.Hash(); return h }() {
		t.Fatalf("format %d round trip changed the state (index %d)", FormatVersion, b)
	}
}

// TestUnknownFormatRefused: a format this build does not know is refused
// and named.
func TestUnknownFormatRefused(t *testing.T) {
	raw, err := os.ReadFile("testdata/upgrade-v1.snap")
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), raw...)
	bad[len(magic)] = FormatVersion + 1
	_, err = Read(bytes.NewReader(bad), fsm.New())
	if err == nil || !strings.Contains(err.Error(), "unsupported snapshot format version 3 (this build reads 1 to 2)") {
		t.Fatalf("got %v", err)
	}
}

// beforeGroupsStateHash is the state hash the build of snapshot format 2
// reported for testdata/before-groups-v2.snap.
const beforeGroupsStateHash = "7d31cd6ca90f9eb8732a2318db00deb4d9c2140c2a80de49178f6a4044ec84fa"

// TestUpgradeBeforeGroups: a snapshot written by format 2 (before groups)
// loads into the current build as the state the same commands build
// today — every queued or live job in its tenant's unnamed group — and
// both go on alike with groups, caps and both group orders.
func TestUpgradeBeforeGroups(t *testing.T) {
	raw, err := os.ReadFile("testdata/before-groups-v2.snap")
	if err != nil {
		t.Fatal(err)
	}
	if raw[len(magic)] != 2 {
		t.Fatalf("fixture is format %d, want 2", raw[len(magic)])
	}
	// The fixture is what the old build wrote (header: magic, version 2,
	// index 28).
	state := raw[len(magic)+2 : len(raw)-sha256.Size]
	if sum := sha256.Sum256(state); hex.EncodeToString(sum[:]) != beforeGroupsStateHash {
		t.Fatalf("fixture state hash %x, want %s", sum, beforeGroupsStateHash)
	}
	loaded := fsm.New()
	index, err := Read(bytes.NewReader(raw), loaded)
	if err != nil {
		t.Fatalf("reading a format 2 snapshot: %v", err)
	}
	if index != 28 {
		t.Fatalf("index %d, want 28", index)
	}
	replayed := scenario.NewMachine()
	script, err := os.Open("testdata/before-groups-v2.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer script.Close()
	if _, err := scenario.Run(script, replayed, io.Discard, scenario.Options{}); err != nil {
		t.Fatal(err)
	}
	h1, _ := loaded.Hash()
	h2, _ := replayed.F.Hash()
	if h1 != h2 {
		t.Fatalf("a format 2 snapshot loads to state %x, the same commands build %x", h1, h2)
	}
	// A state without groups is still written as before groups: same
	// bytes, same hash, readable by the build that wrote it.
	if hex.EncodeToString(h1[:]) != beforeGroupsStateHash {
		t.Fatalf("the loaded state hashes to %x, the build before groups to %s", h1, beforeGroupsStateHash)
	}
	var groups []string
	loaded.Read(func(s *sfq.Scheduler) {
		s.Tenants(func(_ uint32, tn *sfq.Tenant) bool {
			s.Groups(tn.Name, func(g *sfq.Group) bool {
				groups = append(groups, fmt.Sprintf("%s/%q running=%d queued=%d", tn.Name, g.Name, g.Running, g.Queued))
				return true
			})
			return true
		})
	})
	if got := strings.Join(groups, " "); got != `gold/"" running=2 queued=1 free/"" running=1 queued=3 idle/"" running=1 queued=0` {
		t.Fatalf("groups after the upgrade: %s", got)
	}

	more := "at 50s\ntenant gold group_cap=1 group_order=fair\ntenant free group_order=fair\n" +
		"submit gold x2 size=md cost=1s group=a\nsubmit gold x2 size=md cost=1s group=b\nsubmit free x2 size=md cost=1s group=c\n" +
		"group gold b cap=2\n" + strings.Repeat("dispatch md worker=u%d\n", 6) + "finish 2 cpu=1s\nfinish 5 cpu=1s\n" +
		strings.Repeat("dispatch md worker=v%d\n", 3) + "show group gold a\nshow group gold b\nshow tenant free\n"
	more = numbered(more)
	var out1, out2 bytes.Buffer
	scenario.Run(strings.NewReader(more), &scenario.Machine{F: loaded}, &out1, scenario.Options{})
	scenario.Run(strings.NewReader(more), replayed, &out2, scenario.Options{})
	if a, b := strings.Split(out1.String(), "hash=")[0], strings.Split(out2.String(), "hash=")[0]; a != b || strings.Contains(a, "error") {
		t.Fatalf("after the upgrade:\n%s\nreplayed:\n%s", out1.String(), out2.String())
	}
	if !strings.Contains(out1.String(), "group=a") || !strings.Contains(out1.String(), "group gold b cap=2") {
		t.Fatalf("the groups did not run:\n%s", out1.String())
	}
	t.Logf("after the upgrade:\n%s", out1.String())

	// Now that it uses groups, its state is written as version 3 and reads
	// back to the same state.
	v, err := loaded.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Write(&buf, v); err != nil {
		t.Fatal(err)
	}
	again := fsm.New()
	if _, err := Read(&buf, again); err != nil {
		t.Fatal(err)
	}
	if a, _ := again.Hash(); a != func() [32]byte { h, _ := loaded.Hash(); return h }() {
		t.Fatal("a round trip of a state with groups changed it")
	}
}

// numbered replaces each %d of a script by 1, 2, 3, ... in order.
func numbered(script string) string {
	var b strings.Builder
	for i, part := range strings.Split(script, "%d") {
		if i > 0 {
			fmt.Fprintf(&b, "%d", i)
		}
		b.WriteString(part)
	}
	return b.String()
}
