package worker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestSlotsNameThemselvesInTheLog: every line a slot of a Worker logs
// names the slot (slot=ID-N), on the program's own logger; a Worker of
// one slot names its ID.
func TestSlotsNameThemselvesInTheLog(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	for _, n := range []int{3, 1} {
		w, err := NewWorker(Config{ID: "thumbs", MaxConcurrent: n, Servers: []string{"127.0.0.1:1"}, Runner: instant{}, Logger: logger.With("app", "shop")})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range w.agents {
			a.log.Info("job started", "job", 7)
		}
	}
	want := `level=INFO msg="job started" app=shop slot=thumbs-1 job=7
level=INFO msg="job started" app=shop slot=thumbs-2 job=7
level=INFO msg="job started" app=shop slot=thumbs-3 job=7
level=INFO msg="job started" app=shop slot=thumbs job=7
`
	if got := buf.String(); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
	if strings.Count(buf.String(), "slot=") != 4 {
		t.Error("a line without its slot")
	}
}
