package pbcodec

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
)

// entry100 is a log entry of 100 keyed submits, as a batch of 100 makes.
func entry100() *clusterpb.Envelope {
	env := &clusterpb.Envelope{Version: 1, StampMs: 1_790_000_000_000}
	for i := range 100 {
		env.Commands = append(env.Commands, &clusterpb.Command{Cmd: &clusterpb.Command_Submit{Submit: &clusterpb.SubmitJob{
			Tenant: fmt.Sprintf("tenant-%d", i%7), IdempotencyKey: fmt.Sprintf("order-%06d", i),
			JobType: "render", Size: pb.Size_SM, EstCostMs: 1000, Payload: []byte(`{"page":17}`),
			MaxAttempts: 3, TimeoutMs: 60_000,
		}}})
	}
	return env
}

// BenchmarkEntry100 encodes and decodes a log entry of 100 submits with
// protobuf's codec and with this package's (go test -bench Entry100
// -benchmem ./internal/pbcodec/).
func BenchmarkEntry100(b *testing.B) {
	env := entry100()
	data, err := Marshal(env)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("marshal/protobuf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := deterministic.Marshal(env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal/pbcodec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Marshal(env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal/protobuf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(data, &clusterpb.Envelope{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal/pbcodec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := Unmarshal(data, &clusterpb.Envelope{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal/envelope", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := UnmarshalEnvelope(data, &clusterpb.Envelope{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
