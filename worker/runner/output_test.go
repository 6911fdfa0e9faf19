package runner

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// The bounded log, fed chunks of every size, is always the newest suffix of
// all output, at most max bytes, and at least max/2 once that much was
// written.
func TestBoundedLogModel(t *testing.T) {
	for _, max := range []int64{1, 2, 7, 100, 4096} {
		path := filepath.Join(t.TempDir(), "log")
		l, err := openBoundedLog(path, max)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, uint64(max)))
		src := pattern(300 * int(2*max+2))
		var all []byte
		for i := range 300 {
			chunk := src[len(all) : len(all)+rng.IntN(int(2*max)+2)]
			if n, err := l.Write(chunk); n != len(chunk) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			all = append(all, chunk...)
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lo := min(int64(len(all)), max/2)
			if int64(len(got)) > max || int64(len(got)) < lo || !bytes.HasSuffix(all, got) {
				t.Fatalf("max %d, write %d (%d bytes, %d in all): file has %d bytes, want a suffix of the output in [%d, %d]",
					max, i, len(chunk), len(all), len(got), lo, max)
			}
			if int64(len(chunk)) <= max && !bytes.HasSuffix(got, chunk) {
				t.Fatalf("max %d, write %d: the newest chunk was cut", max, i)
			}
			if int64(len(got)) != l.size {
				t.Fatalf("size %d, file has %d bytes", l.size, len(got))
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBoundedLogOversizedExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, pattern(1000), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := openBoundedLog(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	l.Write([]byte("new\n"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	want := string(pattern(1000)[1000-46:]) + "new\n"
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Errorf("file = %q, want %q", got, want)
	}
}

func TestBoundedLogNilDiscards(t *testing.T) {
	l, err := openBoundedLog("", 10)
	if err != nil || l != nil {
		t.Fatalf("openBoundedLog(\"\") = %v, %v", l, err)
	}
	if n, err := l.Write([]byte("abc")); n != 3 || err != nil {
		t.Errorf("Write = %d, %v", n, err)
	}
	if err := l.Close(); err != nil {
		t.Error(err)
	}
}

func TestTailBuffer(t *testing.T) {
	for _, n := range []int{1, 5, 4096} {
		tb := &tailBuffer{n: n}
		rng := rand.New(rand.NewPCG(2, uint64(n)))
		src := pattern(500 * (3*n + 1))
		var all []byte
		for range 500 {
			chunk := src[len(all) : len(all)+rng.IntN(3*n+1)]
			tb.Write(chunk)
			all = append(all, chunk...)
			want := all[max(0, len(all)-n):]
			if got := tb.String(); got != string(want) {
				t.Fatalf("n %d after %d bytes: tail %q, want %q", n, len(all), got, want)
			}
			if cap(tb.buf) > 3*n+4096 {
				t.Fatalf("n %d: buffer grew to %d", n, cap(tb.buf))
			}
		}
	}
}

// pattern returns n bytes with no short period, so that any cut is visible.
func pattern(n int) []byte {
	var b []byte
	for i := 0; len(b) < n; i++ {
		b = fmt.Appendf(b, "%05d|", i)
	}
	return b[:n]
}
