package rpc

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/joblist"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// TestPageTokenRefusal: a page token this server did not issue is
// refused as INVALID_ARGUMENT with the message and the BadRequest that
// name page_token, the status an edge check of its own (fieldErr) sends:
// by the bulk calls and by ListJobs, in either direction.
func TestPageTokenRefusal(t *testing.T) {
	same := func(what string, got, want error) {
		t.Helper()
		if !proto.Equal(status.Convert(got).Proto(), status.Convert(want).Proto()) {
			t.Errorf("%s: %v, want %v", what, status.Convert(got).Proto(), status.Convert(want).Proto())
		}
	}
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
