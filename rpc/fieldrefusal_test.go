package rpc

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/joblist"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/snapshot"
)

// TestPageTokenRefusal: a page token this server did not issue is
// refused as INVALID_ARGUMENT with the message and the BadRequest that
// name page_token, the status an edge check of its own (fieldErr) sends:
// by the bulk calls and by ListJobs, in either direction.
func TestPageTokenRefusal(t *testing.T) {
	same := sameStatus(t)
	_, err := bulkCommand(fsm.BulkCancel, "acme", &pb.BulkJobsRequest{PageToken: "x7"}, 0, true)
	same("bulk", err, fieldErr(codes.InvalidArgument, "page_token", "%q is not a token this server issued", "x7"))
	for _, c := range []struct {
		tok  string
		down bool
		want error
	}{
		{"d7", false, fieldErr(codes.InvalidArgument, "page_token", "%q is not a token this server issued", "d7")},
		{"p7", true, fieldErr(codes.InvalidArgument, "page_token", "%q is not a token this server issued for a newest-first list", "p7")},
	} {
		_, err := joblist.ParseListToken(c.tok, c.down)
		same(c.tok, refusalErr(sfq.RefusalOf(err)), c.want)
	}
}

// sameStatus compares two errors' statuses whole: code, message and
// details.
func sameStatus(t *testing.T) func(what string, got, want error) {
	return func(what string, got, want error) {
		t.Helper()
		if !proto.Equal(status.Convert(got).Proto(), status.Convert(want).Proto()) {
			t.Errorf("%s: %v, want %v", what, status.Convert(got).Proto(), status.Convert(want).Proto())
		}
	}
}

// TestEvidenceWindowRefusal: a statement's or certificate's window
// refused is INVALID_ARGUMENT with the message and the BadRequest that
// name its field, the status an edge check of its own (fieldErr) sends,
// before any replay is held.
func TestEvidenceWindowRefusal(t *testing.T) {
	same := sameStatus(t)
	ctx := context.WithValue(context.Background(), identityKey{}, auth.Identity{Role: auth.RoleAdmin})
	s := &ClientService{}
	for _, c := range []struct {
		w    *pb.EvidenceWindow
		want error
	}{
		{&pb.EvidenceWindow{ByTime: true, FromIndex: 3}, fieldErr(codes.InvalidArgument, "window", "give indexes or, with by_time, times, not both")},
		{&pb.EvidenceWindow{ToMs: 5}, fieldErr(codes.InvalidArgument, "window.by_time", "from_ms and to_ms need by_time")},
		{&pb.EvidenceWindow{ByTime: true, FromMs: -1}, fieldErr(codes.InvalidArgument, "window.from_ms", "negative time")},
		{&pb.EvidenceWindow{FromIndex: 9, ToIndex: 4}, fieldErr(codes.InvalidArgument, "window.to_index", "%d is before from_index %d", 4, 9)},
		{&pb.EvidenceWindow{ByTime: true, FromMs: 9, ToMs: 9}, fieldErr(codes.InvalidArgument, "window.to_ms", "%d is not after from_ms %d", 9, 9)},
	} {
		err := s.evidenceCall(ctx, "acme", c.w, func(string, snapshot.WindowSpec) error {
			t.Fatalf("%v: replayed", c.w)
			return nil
		})
		same(c.w.String(), err, c.want)
	}
}
