package worker

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// How a session ends, as Run reads it.

// ErrRefused is matched (errors.Is) by the error Run returns when the
// cluster refuses the worker in a way no retry can change.
var ErrRefused = errors.New("the cluster refuses this worker")

// RefusedError is Run's error when the cluster refuses the worker for
// good: which worker, the server that said so, and its status.
type RefusedError struct {
	Worker, Server string
	Err            error // a gRPC status error
}

func (e *RefusedError) Error() string {
	st := status.Convert(e.Err)
	return fmt.Sprintf("worker %q: %s refuses it: %s (%s)", e.Worker, e.Server, st.Message(), code.Code(st.Code()).String())
}

// Unwrap returns the status error and ErrRefused.
func (e *RefusedError) Unwrap() []error { return []error{e.Err, ErrRefused} }

// refusal reports whether a session's error is a refusal no retry can
// change (Run).
func refusal(err error) bool {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.NotFound, codes.InvalidArgument:
		return true
	}
	return false
}

type redirectError struct{ id, addr string }

func (e *redirectError) Error() string { return "redirected to " + e.id + " at " + e.addr }

// silent is a session's end for want of an answer from the server: its
// stream may be dead while it looks open.
type silent struct{ error }

func (e silent) Unwrap() error { return e.error }

// silenceLimit is how long a session may go without an acknowledged
// heartbeat before the worker gives up on it: four heartbeats (at least a
// second), and at most half the self-kill deadline, so that a worker cut
// off from a leader finds the next one before it kills its job.
func silenceLimit(interval, selfKill time.Duration) time.Duration {
	limit := max(4*interval, time.Second)
	if selfKill > 0 {
		limit = min(limit, selfKill/2)
	}
	return limit
}
