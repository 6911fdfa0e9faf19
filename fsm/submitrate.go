package fsm

import "github.com/baristahq/barista/sfq"

// The cluster's submit_rate (feature level 5) is an sfq.RateLimit: each
// tenant may submit at most N per PeriodMs, in bursts of up to Burst (0:
// N); N = 0 is no limit. The leader holds it before proposing (so that
// every node's submits count against one allowance, rpc/submitrate.go);
// it is replicated so that every leader holds the same one.

func encodeSubmitRate(e *sfq.Encoder, r sfq.RateLimit) {
	e.Uvarint(uint64(r.N))
	e.Varint(r.PeriodMs)
	e.Uvarint(uint64(r.Burst))
}

func decodeSubmitRate(d *sfq.Decoder) sfq.RateLimit {
	return sfq.RateLimit{N: d.Uint32(), PeriodMs: d.Varint(), Burst: d.Uint32()}
}
