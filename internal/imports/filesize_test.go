package imports

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the longest a hand-written source file may be: past it, a
// file holds more than one concern and is split by concern.
const maxLines = 1000

// TestNoSourceFileOverAThousandLines walks the module for hand-written Go,
// Python and TypeScript sources (tests and generated code aside) and names each one
// longer than maxLines.
func TestNoSourceFileOverAThousandLines(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "dist" || name == "testdata" || name == "__pycache__" ||
				path == filepath.Join(root, "bin")) { // bin/: builds, not sources
				return filepath.SkipDir
			}
			return nil
		}
		if !handWritten(name) {
			return nil
		}
		n, generated, err := countLines(path)
		if err != nil {
			return err
		}
		if generated {
			return nil
		}
		checked++
		if n > maxLines {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s has %d lines (at most %d): split it by concern", rel, n, maxLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d source files checked under %s: the walk missed the module", checked, root)
	}
}

// handWritten reports whether a file name is a source file that is
// neither a test nor protobuf output.
func handWritten(name string) bool {
	switch {
	case strings.HasSuffix(name, "_test.go"), strings.HasSuffix(name, ".pb.go"), strings.HasSuffix(name, ".pb.gw.go"):
		return false
	case strings.HasSuffix(name, "_pb2.py"), strings.HasSuffix(name, "_pb2_grpc.py"), strings.HasSuffix(name, ".pyi"):
		return false
	case strings.HasPrefix(name, "test_") && strings.HasSuffix(name, ".py"), name == "conftest.py":
		return false
	case strings.HasSuffix(name, "_pb.ts"), strings.HasSuffix(name, ".d.ts"), strings.HasSuffix(name, ".test.ts"):
		return false
	}
	return strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".py") || strings.HasSuffix(name, ".ts")
}

// countLines counts a file's lines and reports whether it says it is
// generated (Go's "Code generated ... DO NOT EDIT." convention).
func countLines(path string) (int, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n, generated := 0, false
	for sc.Scan() {
		n++
		if line := sc.Text(); strings.Contains(line, "Code generated") && strings.Contains(line, "DO NOT EDIT") {
			generated = true
		}
	}
	return n, generated, sc.Err()
}
