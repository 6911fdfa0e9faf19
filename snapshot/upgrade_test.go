package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"strings"
	"testing"

	"barista/fsm"
	pb "barista/proto"
	"barista/snapshot/scenario"
)

// v1StateHash is the state hash the build of snapshot format 1 reported for
// testdata/upgrade-v1.snap (the SHA-256 of its state part).
const v1StateHash = "22a3fb7a595b15af46c6904f37ee8c509b0d2a8ad380b434f707bbe4995b7949"

// TestUpgradeFromV1: a snapshot written by format 1 loads into the current
// build at feature level 1, where it hashes, and is written back, exactly
// as the old build did; raised to level 2 it is the state the same
// commands build today, and both go on alike.
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
	// At level 1 this build hashes it as the old build did, and writes it
	// back byte for byte: a voter still on the old build can install it.
	if h, _ := loaded.Hash(); loaded.Level() != fsm.Level1 || hex.EncodeToString(h[:]) != v1StateHash {
		t.Fatalf("loaded at level %d with hash %x, want level 1 and %s", loaded.Level(), h, v1StateHash)
	}
	v1, err := loaded.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var back bytes.Buffer
	if _, err := Write(&back, v1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Bytes(), raw) {
		t.Fatalf("written back at level 1: %d bytes, format %d, not the old build's file", back.Len(), back.Bytes()[len(magic)])
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
	// The leader raises the level once every voter runs the new build.
	if res, err := loaded.ApplyEnvelope(32, &pb.Envelope{Version: fsm.Version, StampMs: 1, Commands: []*pb.Command{
		{Cmd: &pb.Command_SetFeatureLevel{SetFeatureLevel: &pb.SetFeatureLevel{Level: fsm.Level2}}}}}); err != nil || res[0].Code != fsm.OK {
		t.Fatalf("raising the level: %v %v", res, err)
	}
	h1, _ := loaded.Hash()
	h2, _ := replayed.F.Hash()
	if h1 != h2 {
		t.Fatalf("a format 1 snapshot raised to level 2 is state %x, the same commands build %x", h1, h2)
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

	// At level 2 it is written again as format 2.
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
		t.Fatalf("format 2 round trip changed the state (index %d)", b)
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
