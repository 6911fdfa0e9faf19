package wire

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestPythonLimits: the Python SDK's copy of the cluster's limits
// (sdk/python/src/barista/_limits.py) has the values of this one.
func TestPythonLimits(t *testing.T) {
	b, err := os.ReadFile("../../sdk/python/src/barista/_limits.py")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{
		"MAX_MESSAGE_BYTES": MaxMessageBytes, "MAX_BATCH": MaxBatch, "MAX_BATCH_BYTES": MaxBatchBytes,
		"MIN_SNOOZE_MS": MinSnoozeMs, "MAX_SNOOZE_MS": MaxSnoozeMs,
	}
	got := map[string]int64{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+) = (\d+)$`).FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		got[m[1]] = n
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("_limits.py: %s = %d, want %d", name, got[name], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("_limits.py holds %v, want exactly %v", got, want)
	}
}
