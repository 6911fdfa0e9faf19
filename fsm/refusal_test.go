package fsm

import (
	"testing"

	"github.com/baristahq/barista/internal/text"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// TestRefusalsCarryTheirField: a refusal names the field at fault as
// data, beside its message, in the check's verdict and in Apply's result
// alike; nothing reads it back out of the text.
func TestRefusalsCarryTheirField(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("a", pb.Tier_GOLD))
	big := make([]byte, 2<<20)
	cases := []struct {
		name   string
		cmd    *clusterpb.Command
		code   Code
		field  string
		reason string
	}{
		{"cost", submit("a", "", -1, ""), Invalid, "est_cost_ms", ""},
		{"payload", submit("a", "", 1000, string(big)), Invalid, "payload", text.ReasonTooLarge},
		{"job type", &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_MD, EstCostMs: 1, JobType: "a\x00b"}}}, Invalid, "job_type", ""},
		{"unknown tenant", submit("nobody", "", 1000, ""), NotFound, "", text.ReasonTenantUnknown},
		{"multiplier", upsert(&clusterpb.TenantUpsert{Name: "a", Tier: pb.Tier_GOLD, Multiplier: 1 << 30}), Invalid, "multiplier", ""},
		{"group", &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{Tenant: "a", Size: pb.Size_MD, EstCostMs: 1, Group: "bad group"}}}, Invalid, "group", ""},
	}
	for _, tc := range cases {
		v := admitOne(h.f, tc.cmd)
		r := h.one(tc.cmd)
		for _, got := range []Result{v, r} {
			if got.Code != tc.code || got.Field != tc.field || got.Reason != tc.reason {
				t.Errorf("%s: %v field %q reason %q (%s), want %v field %q reason %q", tc.name, got.Code, got.Field, got.Reason, got.Msg, tc.code, tc.field, tc.reason)
			}
			if ref := got.Refusal(); ref == nil || ref.Field != tc.field {
				t.Errorf("%s: Refusal() %+v, want field %q", tc.name, ref, tc.field)
			}
		}
	}
}
