package fsm

import (
	"strings"
	"testing"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// TestEnumsMatch: every size, tier, class and outcome of the core has the
// proto value of the same name, both conversions take one to the other,
// and the proto's unspecified and out-of-range values are refused (but
// an unspecified class, which is normal).
func TestEnumsMatch(t *testing.T) {
	for s := sfq.Size(0); s < sfq.NumSizes; s++ {
		p := SizeToPB(s)
		back, err := SizeFromPB(p)
		if err != nil || back != s || strings.ToLower(p.String()) != s.String() {
			t.Errorf("size %s: proto %v, back %v, %v", s, p, back, err)
		}
	}
	for tier := sfq.Tier(0); tier < sfq.NumTiers; tier++ {
		p := TierToPB(tier)
		back, err := TierFromPB(p)
		if err != nil || back != tier || strings.ToLower(p.String()) != tier.String() {
			t.Errorf("tier %s: proto %v, back %v, %v", tier, p, back, err)
		}
	}
	for c := sfq.Class(0); c < sfq.NumClasses; c++ {
		p := ClassToPB(c)
		back, err := ClassFromPB(p)
		if err != nil || back != c || strings.ToLower(p.String()) != c.String() {
			t.Errorf("class %s: proto %v, back %v, %v", c, p, back, err)
		}
	}
	for o := sfq.OutcomeOK; o <= sfq.OutcomeCancelled; o++ {
		p := OutcomeToPB(o)
		back, err := OutcomeFromPB(p)
		if err != nil || back != o || strings.ToLower(p.String()) != o.String() {
			t.Errorf("outcome %s: proto %v, back %v, %v", o, p, back, err)
		}
	}
	for _, s := range []pb.Size{pb.Size_SIZE_UNSPECIFIED, pb.Size_LG + 1, -1} {
		if _, err := SizeFromPB(s); err == nil {
			t.Errorf("size %d accepted", s)
		}
	}
	for _, tier := range []pb.Tier{pb.Tier_TIER_UNSPECIFIED, pb.Tier_DIAMOND + 1} {
		if _, err := TierFromPB(tier); err == nil {
			t.Errorf("tier %d accepted", tier)
		}
	}
	for _, o := range []pb.Outcome{pb.Outcome_OUTCOME_UNSPECIFIED, pb.Outcome_UNKNOWN_KIND + 1} {
		if _, err := OutcomeFromPB(o); err == nil {
			t.Errorf("outcome %d accepted", o)
		}
	}
	if c, err := ClassFromPB(pb.Class_CLASS_UNSPECIFIED); err != nil || c != sfq.ClassNormal {
		t.Errorf("an unspecified class: %v %v", c, err)
	}
}
