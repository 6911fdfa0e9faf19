package raftnode

import (
	"errors"
	"testing"
)

// TestClusterLevel: the level every voter understands is the lowest of
// this node's own and each other voter's answer; a build before feature
// levels answers 0, read as 1; a voter that cannot be asked holds the
// level back (an error naming it).
func TestClusterLevel(t *testing.T) {
	answers := map[string]uint32{"n2": 2, "n3": 2, "old": 0, "one": 1}
	probe := func(id string) (uint32, error) {
		if l, ok := answers[id]; ok {
			return l, nil
		}
		return 0, errors.New("connection refused")
	}
	for _, c := range []struct {
		own    uint32
		voters []string
		want   uint32
		err    string
	}{
		{2, []string{"n1"}, 2, ""},
		{2, []string{"n1", "n2", "n3"}, 2, ""},
		{1, []string{"n1", "n2", "n3"}, 1, ""},
		{2, []string{"n1", "n2", "one"}, 1, ""},
		{2, []string{"n1", "old", "n3"}, 1, ""},
		{2, []string{"n1", "n2", "gone"}, 0, "voter gone: connection refused"},
	} {
		got, err := clusterLevel("n1", c.own, c.voters, probe)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("own %d voters %v: %d %v, want %d %q", c.own, c.voters, got, err, c.want, c.err)
		}
	}
}
