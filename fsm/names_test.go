package fsm

import (
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// TestApplyRefusesControlAndBidiInNames: a command that reached the log
// without the edge's checks (another build's leader, a forged entry) is
// refused in Apply alike: a job type, a group, a tenant name or a worker
// ID with a control or bidirectional formatting character; the state
// holds none of them.
func TestApplyRefusesControlAndBidiInNames(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	sub := func(typ, group string) *clusterpb.Command {
		return &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "acme", Size: pb.Size_SM, EstCostMs: 10, JobType: typ, Group: group}}}
	}
	for _, c := range []struct {
		cmd *clusterpb.Command
		msg string
	}{
		{sub("a\x00b", ""), `job_type "a\x00b" has U+0000 (a control character) at byte 1`},
		{sub("invoice\u202epdf.exe", ""), `job_type "invoice\u202epdf.exe" has U+202E (a bidirectional formatting character) at byte 7`},
		{sub("", "g\x00"), `group: group name "g\x00" has '\x00' at byte 1 (allowed: A-Z a-z 0-9 . _ : @ -)`},
		{sub("", "g\u202e"), `group: group name "g\u202e" has '\u202e' at byte 1 (allowed: A-Z a-z 0-9 . _ : @ -)`},
		{tenant("evil\u202e", pb.Tier_GOLD), `tenant name "evil\u202e" has U+202E (a bidirectional formatting character) at byte 4`},
		{&clusterpb.Command{Cmd: &clusterpb.Command_Dispatch{Dispatch: &clusterpb.Dispatch{WorkerId: "w\u2066", Size: pb.Size_SM, Credit: 1}}},
			`worker_id "w\u2066" has U+2066 (a bidirectional formatting character) at byte 1`},
	} {
		if r := h.one(c.cmd); r.Code != Invalid || r.Msg != ""+c.msg {
			t.Errorf("want INVALID_ARGUMENT %q, got %v %q", c.msg, r.Code, r.Msg)
		}
	}
	if r := h.one(sub("nightly report", "")); r.Code != OK || !r.Created {
		t.Errorf("a job type with a space: %v %q", r.Code, r.Msg)
	}
}
