package wire

import (
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/baristahq/barista/proto"
)

// Headers the servers and the client share.
const (
	// HeaderIndex is the header of a write's answer that gives the index
	// of the log entry that applied it; HeaderMinIndex, sent with a
	// read, asks for a state at least that new (read-your-writes).
	HeaderIndex    = "x-barista-index"
	HeaderMinIndex = "x-barista-min-index"
	// HeaderWatchCursor and HeaderWatchNext are the headers of a
	// WatchEvents stream: the sequence it starts after, and the next
	// sequence the cluster will write.
	HeaderWatchCursor = "x-barista-watch-cursor"
	HeaderWatchNext   = "x-barista-watch-next"
)

// CodeName is a gRPC code's canonical name ("INVALID_ARGUMENT"), the form
// the cluster writes in messages and a batch item's error.
func CodeName(c codes.Code) string { return code.Code(c).String() }

// FieldKey is the key of an ErrorInfo's metadata that names the request
// field at fault.
const FieldKey = "field"

// Refusal is what a status says of a refused call, read from its details
// (never from its message): the ErrorInfo's reason (of barista's domain)
// and field, a BadRequest's first field, a RetryInfo's delay.
type Refusal struct {
	Reason     string
	Field      string
	Metadata   map[string]string
	RetryAfter time.Duration
	HasRetry   bool
}

// RefusalOf reads the details of st.
func RefusalOf(st *status.Status) Refusal {
	var r Refusal
	if st == nil {
		return r
	}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.Domain == ErrorDomain && r.Reason == "" {
				r.Reason, r.Metadata = d.Reason, d.Metadata
				if f := d.Metadata[FieldKey]; f != "" && r.Field == "" {
					r.Field = f
				}
			}
		case *errdetails.BadRequest:
			if len(d.FieldViolations) > 0 && r.Field == "" {
				r.Field = d.FieldViolations[0].Field
			}
		case *errdetails.RetryInfo:
			if d.RetryDelay != nil {
				r.RetryAfter, r.HasRetry = d.RetryDelay.AsDuration(), true
			}
		}
	}
	return r
}

// Reason returns the reason the cluster gave for refusing a call, in the
// ErrorInfo detail of its status, or "" if it gave none.
func Reason(err error) string {
	st, _ := status.FromError(err)
	return RefusalOf(st).Reason
}

// RetryDelay returns how long the cluster asked the caller to wait before
// it tries again (a RetryInfo detail), and whether it asked.
func RetryDelay(err error) (time.Duration, bool) {
	st, _ := status.FromError(err)
	r := RefusalOf(st)
	return r.RetryAfter, r.HasRetry
}

// StatusBytes is err's status in wire form (a google.rpc.Status, as the
// grpc-status-details-bin trailer holds it).
func StatusBytes(err error) []byte {
	b, _ := proto.Marshal(status.Convert(err).Proto())
	return b
}

// StatusFromBytes reads a status in wire form; a refusal must not say OK.
func StatusFromBytes(b []byte) (*status.Status, error) {
	var st spb.Status
	if err := proto.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	if st.Code == int32(codes.OK) {
		return nil, errors.New("a refusal with status OK")
	}
	return status.FromProto(&st), nil
}

// SetRefusal writes err, a refusal, into a batch item's result: its
// status in wire form (what the SDKs read) and the same refusal in plain
// fields (for a reader of the JSON).
func SetRefusal(r *pb.SubmitResult, err error) {
	st := status.Convert(err)
	ref := RefusalOf(st)
	r.Status = StatusBytes(err)
	r.Error = CodeName(st.Code()) + ": " + st.Message()
	r.Reason, r.Field = ref.Reason, ref.Field
	r.RetryAfterMs = 0
	if ref.HasRetry {
		r.RetryAfterMs = max(ref.RetryAfter.Milliseconds(), 1)
	}
}

// ResultStatus is the refusal of a batch item's result (nil when the job
// was accepted). A result of a server that sends no status (an earlier
// build) is an UNKNOWN status with its error's text as the message: its
// code is not read out of the text.
func ResultStatus(r *pb.SubmitResult) *status.Status {
	if len(r.GetStatus()) > 0 {
		if st, err := StatusFromBytes(r.GetStatus()); err == nil {
			return st
		}
		return status.New(codes.Internal, "a batch result with a malformed status")
	}
	if r.GetError() == "" {
		return nil
	}
	return status.New(codes.Unknown, r.GetError())
}
