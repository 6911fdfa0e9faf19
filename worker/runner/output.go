package runner

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// boundedLog appends to a file and keeps it at most max bytes; see
// Options.LogPath for the scheme. A nil *boundedLog discards everything.
// It is safe for concurrent use (stdout and stderr are copied concurrently).
type boundedLog struct {
	mu   sync.Mutex
	f    *os.File
	size int64 // current size of f as far as we know
	max  int64
	err  error // first error, reported in Result.Err
}

func openBoundedLog(path string, max int64) (*boundedLog, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("runner: open log: %w", err)
	}
	// A file that was already there is made private too.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("runner: open log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("runner: open log: %w", err)
	}
	return &boundedLog{f: f, size: st.Size(), max: max}, nil
}

// Write appends b, cutting the file first if needed. It always reports
// success, so that a failing log never stalls the job's pipes; the first
// error is kept for Err.
func (l *boundedLog) Write(b []byte) (int, error) {
	if l == nil || len(b) == 0 {
		return len(b), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writeLocked(b); err != nil {
		if l.err == nil {
			l.err = fmt.Errorf("runner: write log: %w", err)
		}
		// Resynchronise the size after a partial write or cut.
		if st, serr := l.f.Stat(); serr == nil {
			l.size = st.Size()
		}
	}
	return len(b), nil
}

func (l *boundedLog) writeLocked(b []byte) error {
	if l.size+int64(len(b)) <= l.max {
		n, err := l.f.Write(b)
		l.size += int64(n)
		return err
	}
	// The file would exceed max: keep only the newest keep bytes of
	// (file ++ b), never dropping any of b unless b alone exceeds max.
	keep := max(l.max/2, min(int64(len(b)), l.max))
	if int64(len(b)) >= keep {
		b = b[int64(len(b))-keep:]
	}
	old := make([]byte, min(keep-int64(len(b)), l.size))
	if len(old) > 0 {
		if _, err := l.f.ReadAt(old, l.size-int64(len(old))); err != nil {
			return fmt.Errorf("read tail: %w", err)
		}
	}
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	l.size = 0
	// O_APPEND: both writes go to the (new) end of the file.
	for _, chunk := range [][]byte{old, b} {
		n, err := l.f.Write(chunk)
		l.size += int64(n)
		if err != nil {
			return err
		}
	}
	return nil
}

// Close closes the file and returns the first error seen, if any.
func (l *boundedLog) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.f.Close(); err != nil && l.err == nil {
		l.err = fmt.Errorf("runner: close log: %w", err)
	}
	return l.err
}

// tailBuffer keeps the last n bytes written to it. It is not safe for
// concurrent use: only one copier (of stderr, or of stdout) writes it, and
// the result is read after that copier has finished.
type tailBuffer struct {
	n   int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	written := len(b)
	if len(b) >= t.n {
		t.buf = append(t.buf[:0], b[len(b)-t.n:]...)
		return written, nil
	}
	if len(t.buf)+len(b) > 2*t.n {
		// Compact: keep the last n-len(b) bytes, which with b make n.
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-(t.n-len(b)):]...)
	}
	t.buf = append(t.buf, b...)
	return written, nil
}

func (t *tailBuffer) String() string {
	if len(t.buf) > t.n {
		return string(t.buf[len(t.buf)-t.n:])
	}
	return string(t.buf)
}

// copyOutput copies r to every writer in ws until r fails (EOF, closed, or
// its read deadline passed), then closes done.
func copyOutput(r io.Reader, done chan<- struct{}, ws ...io.Writer) {
	defer close(done)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			for _, w := range ws {
				w.Write(buf[:n]) // our writers never fail
			}
		}
		if err != nil {
			return
		}
	}
}
