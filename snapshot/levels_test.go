package snapshot

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/baristahq/barista/fsm"
)

var writeFixtures = flag.Bool("write-fixtures", false, "write the level fixtures of TestFixturesOfEveryLevel that are missing from testdata")

// levelFixtures are a snapshot of each feature level since the fixtures
// of upgrade_test.go (which reach level 5), with the script that built it
// and the state hash (the SHA-256 of its state part) recorded when it was
// written.
var levelFixtures = []struct {
	snap, script string
	level        uint32
	format       byte
	hash         string
}{
	{"level6.snap", "level6.txt", fsm.Level6, 7, "c1d1f3c75e2269ff31403ac8d8e81d601e2c85b7770497492a91db31080c5e3a"},
	{"level7.snap", "level7.txt", fsm.Level7, 7, "add89a7b7fb7397e6b28023d0c0e6fde0d19d80e8d81adfdef652395ef7dbd08"},
}

// TestFixturesOfEveryLevel: a snapshot written at each feature level
// loads into this build at that level with the hash it was written with,
// is written back byte for byte, and the script that built it builds the
// same state today.
func TestFixturesOfEveryLevel(t *testing.T) {
	for _, fx := range levelFixtures {
		replayed := replayScript(t, fx.script)
		if replayed.F.Level() != fx.level {
			t.Fatalf("%s ends at level %d, want %d", fx.script, replayed.F.Level(), fx.level)
		}
		path := "testdata/" + fx.snap
		if _, err := os.Stat(path); os.IsNotExist(err) && *writeFixtures {
			b := snapshotBytes(t, replayed.F)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b[len(magic)+2 : len(b)-sha256.Size])
			t.Logf("wrote %s: format %d, state hash %x", path, b[len(magic)], sum)
			continue
		}
		_, index := replayed.F.Clock()
		loaded, raw := fixture{fx.snap, fx.format, index, fx.level, fx.hash, false}.load(t)
		if got, want := strings.Join(dumpState(loaded, true), "\n"), strings.Join(dumpState(replayed.F, true), "\n"); got != want {
			t.Fatalf("%s loads to\n%s\n%s builds\n%s", fx.snap, got, fx.script, want)
		}
		h1, _ := loaded.Hash()
		if h2, _ := replayed.F.Hash(); h1 != h2 {
			t.Fatalf("%s: loaded %x, replayed %x", fx.snap, h1, h2)
		}
		if b := snapshotBytes(t, loaded); !bytes.Equal(b, raw) {
			t.Fatalf("%s rewritten at level %d: %d bytes, format %d; not the fixture's %d bytes", fx.snap, fx.level, len(b), b[len(magic)], len(raw))
		}
	}
}
