// Package wire holds what barista's programs outside a server (the Go
// client, the worker) share with the servers without importing them:
// the fixed flow-control windows of every gRPC connection, the rule a
// worker's ID follows, and the bound of the output tails a worker
// reports. The rules themselves are package internal/text's, which the
// servers (package sfq) apply too.
package wire

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/internal/text"
)

// Flow-control windows of every barista connection, fixed (StaticWindows):
// gRPC's default estimates the link's bandwidth-delay product with a PING
// after each message received while none is outstanding, which on a
// worker's stream (a message or two a job) doubled the writes of both
// ends; a connection with fixed windows sends none. One stream moves at
// most StreamWindowBytes per round trip: 1 GB/s on a LAN, 20 MB/s at
// 50 ms.
const (
	StreamWindowBytes = 1 << 20
	ConnWindowBytes   = 4 << 20
)

// StaticWindows fixes a connection's flow-control windows (see
// StreamWindowBytes).
var StaticWindows = []grpc.DialOption{grpc.WithStaticStreamWindowSize(StreamWindowBytes), grpc.WithStaticConnWindowSize(ConnWindowBytes)}

// ErrInvalid is what a refused name wraps: the servers' own error
// (sfq.ErrInvalid), so that a worker refuses an ID in the words the leader
// would.
var ErrInvalid = text.ErrInvalid

// MaxNameLen bounds a worker's ID (sfq.MaxNameLen).
const MaxNameLen = text.MaxNameLen

// ValidateName checks a name the way the leader does (package
// internal/text, which sfq applies too): 1..MaxNameLen bytes of UTF-8
// without spaces, control characters, bidirectional formatting characters
// or line and paragraph separators. The error names field, the character
// and its byte offset.
func ValidateName(field, s string) error { return text.ValidateName(field, s) }

// ValidatePoolName checks a pool's name the way the leader does (package
// internal/text): 1 to 63 of a-z, 0-9 and -, not starting with -.
func ValidatePoolName(s string) error { return text.ValidatePoolName(s) }

// MaxOutputTail bounds each of the stderr and stdout tails a job keeps
// (sfq.MaxOutputTail).
const MaxOutputTail = text.MaxOutputTail

// OutputTail returns the end of a run's stderr or stdout as a job keeps
// it, as the leader cuts it (internal/text): valid UTF-8, each invalid
// sequence becoming U+FFFD, at most MaxOutputTail bytes, cut at a
// character boundary.
func OutputTail(s string) string { return text.OutputTail(s) }

// Where the cluster says, in an ErrorInfo detail of an UNAVAILABLE
// status, that the node no longer leads and did nothing with the call
// (or, to a worker's stream, that the leadership it served has ended): the
// client asks another node, a worker reconnects to the new leader.
const (
	ErrorDomain     = "barista"
	ReasonNotLeader = "NOT_LEADER"
)

// IsNotLeader reports whether err is such a status.
func IsNotLeader(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason == ReasonNotLeader && info.Domain == ErrorDomain {
			return true
		}
	}
	return false
}

// The limits the servers hold every caller to (internal/text, where the
// servers take them too).
const (
	MaxMessageBytes = text.MaxMessageBytes
	MaxBatch        = text.MaxBatch
	MaxBatchBytes   = text.MaxBatchBytes
	MinSnoozeMs     = text.MinSnoozeMs
	MaxSnoozeMs     = text.MaxSnoozeMs
)
