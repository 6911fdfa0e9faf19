package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"hash/fnv"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// smallState is a state with every table in use: tenants, queued, running
// and finished jobs with keys, events, workers, a member.
func smallState(t testing.TB) *fsm.FSM {
	f := fsm.NewLatest()
	var index uint64
	apply := func(cmds ...*clusterpb.Command) {
		index++
		if _, err := f.ApplyEnvelope(index, &clusterpb.Envelope{Version: fsm.Version, StampMs: int64(1000 + index*100), Commands: cmds}); err != nil {
			t.Fatal(err)
		}
	}
	sub := func(tenant, key string) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: tenant, IdempotencyKey: key, Size: pb.Size_SM, EstCostMs: 100, Payload: []byte("p")}}}
	}
	apply(&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_TenantUpsert{TenantUpsert: &clusterpb.TenantUpsert{Name: "b", Tier: pb.Tier_FREE}}})
	apply(sub("a", "k1"), sub("a", ""), sub("b", "k3"))
	apply(&clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w1", Size: pb.Size_SM, Credit: 1}}},
		&clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w2", Size: pb.Size_SM, Credit: 1}}})
	apply(&clusterpb.Command{Cmd: &clusterpb.Command_Started{Started: &clusterpb.Started{Job: 1, Attempt: 1, WorkerId: "w1"}}})
	apply(&clusterpb.Command{Cmd: &clusterpb.Command_Finished{Finished: &clusterpb.Finished{Job: 1, Attempt: 1, WorkerId: "w1", Outcome: pb.Outcome_FAILED, ExitCode: 1, StderrTail: "no", CpuMs: 5}}})
	apply(&clusterpb.Command{Cmd: &clusterpb.Command_MemberUpsert{MemberUpsert: &clusterpb.MemberUpsert{Id: "n1", RaftAddr: "r", GrpcAddr: "g"}}})
	return f
}

// snapshotBytes returns the snapshot Write makes of f now.
func snapshotBytes(t testing.TB, f *fsm.FSM) []byte {
	t.Helper()
	v, err := f.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Write(&buf, v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// logStoreBytes is a small raft.db (1 KiB pages): a current term and
// entries 3..8, less those in holes.
func logStoreBytes(t testing.TB, holes ...uint64) []byte {
	path := filepath.Join(t.TempDir(), LogFile)
	s, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bolt.Options{PageSize: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 8; i++ {
		if err := s.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("entry %d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	s.DeleteRange(1, 2)
	for _, h := range holes {
		s.DeleteRange(h, h)
	}
	s.SetUint64(keyCurrentTerm, 2)
	s.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// bbolt grows files ahead of use: keep the pages in use only.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error { b = b[:tx.Size()]; return nil })
	return b
}

// TestVerifyLogStore: the verifier reads a store's log range, and finds a
// cut, a repeated page and a gap in the log.
func TestVerifyLogStore(t *testing.T) {
	good := logStoreBytes(t)
	info, err := verifyBolt(bytes.NewReader(good), int64(len(good)))
	if err != nil || info.First != 3 || info.Last != 8 || info.New {
		t.Fatalf("%+v %v", info, err)
	}
	cut := good[:len(good)-1024]
	if _, err := verifyBolt(bytes.NewReader(cut), int64(len(cut))); err == nil || !strings.Contains(err.Error(), "it was truncated") {
		t.Fatalf("cut by a page: %v", err)
	}
	// A gap is listed; it is damage only above the snapshot a node
	// starts from.
	holed := logStoreBytes(t, 5, 7)
	info, err = verifyBolt(bytes.NewReader(holed), int64(len(holed)))
	if err != nil || info.First != 3 || info.Last != 8 || !slices.Equal(info.Gaps, []Gap{{5, 5}, {7, 7}}) {
		t.Fatalf("entries 5 and 7 deleted: %+v %v", info, err)
	}
	for _, tc := range []struct {
		snap uint64
		want string
	}{
		{4, "Raft log raft.db is damaged: the log jumps from index 4 to 6: entries are missing"},
		{6, "Raft log raft.db is damaged: the log jumps from index 6 to 8: entries are missing"},
		{7, ""},
		{8, ""},
	} {
		got := ""
		if err := info.GapAfter("raft.db", tc.snap); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("gaps after a snapshot at %d: %q, want %q", tc.snap, got, tc.want)
		}
	}
	// Point the freelist at the root bucket's page: in use and free.
	meta := pickMeta(t, good)
	twice := slices.Clone(good)
	for _, off := range []int{0, 1024} {
		binary.LittleEndian.PutUint64(twice[off+16+32:], meta.root)
		resum(twice[off:])
	}
	if _, err := verifyBolt(bytes.NewReader(twice), int64(len(twice))); err == nil || !strings.Contains(err.Error(), "reached twice") {
		t.Fatalf("freelist on a tree page: %v", err)
	}
}

func pickMeta(t *testing.T, b []byte) boltMeta {
	v := &boltVerifier{r: bytes.NewReader(b), size: int64(len(b))}
	m, err := v.meta()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// resum recomputes a meta page's checksum.
func resum(page []byte) {
	h := fnv.New64a()
	h.Write(page[16 : 16+56])
	binary.LittleEndian.PutUint64(page[16+56:], h.Sum64())
}

func writeSeed(t *testing.T, fuzz, name string, values ...[]byte) {
	dir := filepath.Join("testdata", "fuzz", fuzz)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := []byte("go test fuzz v1\n")
	for _, v := range values {
		b = fmt.Appendf(b, "[]byte(%q)\n", v)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWriteFuzzSeeds writes the seed corpora of this package's fuzz
// targets (run with BARISTA_WRITE_SEEDS=1 after a format change).
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("BARISTA_WRITE_SEEDS") == "" {
		t.Skip("set BARISTA_WRITE_SEEDS=1 to rewrite testdata/fuzz")
	}
	snap := snapshotBytes(t, smallState(t))
	empty := snapshotBytes(t, fsm.New())
	writeSeed(t, "FuzzRead", "seed-state", snap)
	writeSeed(t, "FuzzRead", "seed-empty", empty)
	writeSeed(t, "FuzzRead", "seed-body", snap[:len(snap)-sha256.Size])
	writeSeed(t, "FuzzRead", "seed-truncated", snap[:len(snap)/2])
	// A member ID whose length prefix claims 60 MiB: the decoder used to
	// allocate it all before finding the input short.
	i := bytes.Index(snap, []byte("\x02n1\x01r\x01g"))
	if i < 0 {
		t.Fatal("member record not found")
	}
	huge := append(append(slices.Clone(snap[:i]), binary.AppendUvarint(nil, 60<<20)...), snap[i+1:]...)
	writeSeed(t, "FuzzRead", "regress-string-length", huge)
	meta := []byte(`{"Version":1,"ID":"2-9-100","Index":9,"Term":2,"Peers":null,"Configuration":{"Servers":[{"Suffrage":0,"ID":"n1","Address":"127.0.0.1:7440"}]},"ConfigurationIndex":1,"Size":0,"CRC":null}`)
	writeSeed(t, "FuzzLoadNewest", "seed-state", meta, snap)
	writeSeed(t, "FuzzLoadNewest", "seed-bad-meta", []byte(`{"Version":9}`), empty)
	writeSeed(t, "FuzzVerifyLog", "seed-store", logStoreBytes(t))
}

// FuzzRead decodes arbitrary bytes as a snapshot, as they are and with a
// correct checksum appended (which takes them past the trailer check):
// an error or a state that passes its own check, never a panic. Inputs
// are bounded by the fuzzer, so any allocation out of proportion to them
// (a length or an ID read from the input) shows as a crash or a timeout.
func FuzzRead(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		sum := sha256.Sum256(data)
		for _, in := range [][]byte{data, append(data[:len(data):len(data)], sum[:]...)} {
			m := fsm.New()
			before, _ := m.Hash()
			index, err := Read(bytes.NewReader(in), m)
			if err != nil {
				if after, _ := m.Hash(); after != before {
					t.Fatalf("a failed read changed the state: %v", err)
				}
				continue
			}
			if err := m.Verify(); err != nil {
				t.Fatalf("read a state at %d that fails its check: %v", index, err)
			}
		}
	})
}

// FuzzLoadNewest starts from a data directory holding one snapshot of
// arbitrary metadata and state, as written and with metadata that
// matches the state's size and CRC (which takes the state past the store's
// own check): an error naming the file, or the state, never a panic.
func FuzzLoadNewest(f *testing.F) {
	f.Fuzz(func(t *testing.T, metaJSON, state []byte) {
		// The file store's metadata: raft's plus the CRC64 of state.bin.
		var meta struct {
			raft.SnapshotMeta
			CRC []byte
		}
		var fixed []byte
		if json.Unmarshal(metaJSON, &meta) == nil {
			meta.ID, meta.Version, meta.Size = "2-9-100", 1, int64(len(state))
			h := crc64.New(crc64.MakeTable(crc64.ECMA))
			h.Write(state)
			meta.CRC = h.Sum(nil)
			fixed, _ = json.Marshal(meta)
		}
		for _, m := range [][]byte{metaJSON, fixed} {
			if m == nil {
				continue
			}
			dir := t.TempDir()
			snapDir := filepath.Join(dir, "snapshots", "2-9-100")
			os.MkdirAll(snapDir, 0o755)
			os.WriteFile(filepath.Join(snapDir, "meta.json"), m, 0o644)
			os.WriteFile(filepath.Join(snapDir, "state.bin"), state, 0o644)
			store, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			got, f, err := LoadNewest(store, dir)
			var ue *UnusableError
			switch {
			case err != nil && !errors.As(err, &ue):
				t.Fatalf("not an UnusableError: %v", err)
			case err != nil:
			case got == nil || f == nil:
				t.Fatal("no error and no state")
			default:
				if err := f.Verify(); err != nil {
					t.Fatalf("loaded a state that fails its check: %v", err)
				}
			}
		}
	})
}

// FuzzVerifyLog checks arbitrary bytes as a raft.db: the verifier never
// panics or loops, and a file it accepts is one bbolt opens and walks
// without a panic or a fault, which raft-boltdb then reads as it does at
// start.
func FuzzVerifyLog(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := verifyBolt(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		path := filepath.Join(t.TempDir(), LogFile)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- boltReadsAll(path, info) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("verified, then: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("verified, then bbolt hung")
		}
	})
}

// boltReadsAll opens a verified store with bbolt and raft-boltdb and
// reads it the way a node does, reporting any panic or fault.
func boltReadsAll(path string, info LogInfo) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil // bbolt refuses it with an error: fine
	}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				if len(v) > 0 {
					_ = bytes.Count(v, []byte{0})
				}
				return nil
			})
		})
	})
	db.Close()
	if err != nil || info.New {
		return err
	}
	store, err := OpenLog(path, false)
	if err != nil {
		return err
	}
	defer store.Close()
	// An entry that does not decode is the start check's to report; here
	// only a panic or a fault counts.
	var l raft.Log
	for i := info.First; i <= info.Last && i != 0; i++ {
		_ = store.GetLog(i, &l)
	}
	_, _ = store.GetUint64(keyCurrentTerm)
	return store.StoreLog(&raft.Log{Index: info.Last + 1, Term: 1, Type: raft.LogNoop})
}
