package wire

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sdkLimits are the limits an SDK copies, by the name each SDK gives them.
var sdkLimits = map[string]int64{
	"MAX_MESSAGE_BYTES": MaxMessageBytes, "MAX_BATCH": MaxBatch, "MAX_BATCH_BYTES": MaxBatchBytes,
	"MIN_SNOOZE_MS": MinSnoozeMs, "MAX_SNOOZE_MS": MaxSnoozeMs,
}

// checkLimits: the file at path assigns exactly the limits of sdkLimits,
// each with this package's value; re matches an assignment, its name and
// its number (digits, maybe with _ between them).
func checkLimits(t *testing.T, path string, re *regexp.Regexp) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		n, err := strconv.ParseInt(strings.ReplaceAll(m[2], "_", ""), 10, 64)
		if err != nil {
			t.Fatalf("%s: %s = %s: %v", path, m[1], m[2], err)
		}
		got[m[1]] = n
	}
	for name, v := range sdkLimits {
		if got[name] != v {
			t.Errorf("%s: %s = %d, want %d", path, name, got[name], v)
		}
	}
	if len(got) != len(sdkLimits) {
		t.Errorf("%s holds %v, want exactly %v", path, got, sdkLimits)
	}
}

// TestPythonLimits: the Python SDK's copy of the cluster's limits
// (sdk/python/src/barista/_limits.py) has the values of this one.
func TestPythonLimits(t *testing.T) {
	checkLimits(t, "../../sdk/python/src/barista/_limits.py", regexp.MustCompile(`(?m)^([A-Z_]+) = (\d+)$`))
}

// TestTypeScriptLimits: the TypeScript SDK's copy of the cluster's limits
// (sdk/typescript/src/limits.ts) has the values of this one.
func TestTypeScriptLimits(t *testing.T) {
	checkLimits(t, "../../sdk/typescript/src/limits.ts", regexp.MustCompile(`(?m)^export const ([A-Z_]+) = (\d[\d_]*);$`))
}
