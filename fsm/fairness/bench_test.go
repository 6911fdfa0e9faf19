package fairness

import (
	"fmt"
	"testing"

	"github.com/baristahq/barista/sfq"
)

// BenchmarkDispatchWrites measures what the state machine adds to a
// dispatch and to a finish (a charge and an observation of the tenant,
// eligible before and after), over tenants that all have eligible work,
// with cluster time moving 1 ms a write.
func BenchmarkDispatchWrites(b *testing.B) {
	for _, tenants := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			l := New(0)
			for i := range tenants {
				l.Observe(0, uint32(i), 1<<sfq.ClassNormal, sfq.Weight(1+i%5)*sfq.WeightOne)
			}
			b.ReportAllocs()
			now := sfq.Time(0)
			for i := 0; b.Loop(); i++ {
				now++
				ti := uint32(i * 7919 % tenants)
				l.Charge(now, sfq.ClassNormal, ti, 1500)
				l.Observe(now, ti, 1<<sfq.ClassNormal, sfq.Weight(1+int(ti)%5)*sfq.WeightOne)
			}
		})
	}
}
