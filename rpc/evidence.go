package rpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/evidencecall"
	"github.com/baristahq/barista/internal/wire"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/snapshot"
)

// The evidence of fairness (SPEC §3, docs/fairness.md): usage statements
// and certificates, which the answering node derives by replaying a
// window of its own log (snapshot.Statement, snapshot.Certificate), held
// to the replays a node and a caller may hold (internal/evidencecall),
// and a job's place in line.

// evidenceCall scopes and checks a request, and holds a replay slot while
// build runs.
func (s *ClientService) evidenceCall(ctx context.Context, named string, w *pb.EvidenceWindow, build func(tenant string, spec snapshot.WindowSpec) error) error {
	tenant, err := scopeTenant(ctx, named, true)
	if err != nil {
		return err
	}
	if err := sfq.ValidateName("tenant", tenant); err != nil {
		return refusalErr(sfq.RefusalOf(err))
	}
	spec, err := evidencecall.Window(w)
	if err != nil {
		return refusalErr(sfq.RefusalOf(err))
	}
	id := IdentityFrom(ctx)
	who := fmt.Sprintf("%d/%s", id.Role, id.Tenant)
	release, err := s.evidence.Acquire(who)
	if err != nil {
		return err
	}
	defer release()
	err = build(tenant, spec)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, snapshot.ErrOutOfRange):
		return fieldErr(codes.OutOfRange, "window", "%s", err.Error())
	case errors.Is(err, snapshot.ErrLogDamaged):
		// Most likely compacted while the replay read it.
		return status.Errorf(codes.Unavailable, "the log changed while it was read (compacted after a snapshot): ask again: %v", err)
	}
	return status.Errorf(codes.Internal, "replaying the window: %v", err)
}

// UsageStatement implements the client service: the statement is this
// node's own replay of the window (no forwarding).
func (s *ClientService) UsageStatement(ctx context.Context, req *pb.UsageStatementRequest) (*pb.UsageStatementResponse, error) {
	format := req.Format
	switch format {
	case "":
		format = "json"
	case "json", "csv":
	default:
		return nil, fieldErr(codes.InvalidArgument, "format", "%q (want json or csv)", req.Format)
	}
	var out *pb.UsageStatementResponse
	err := s.evidenceCall(ctx, req.Tenant, req.Window, func(tenant string, spec snapshot.WindowSpec) error {
		st, err := snapshot.Statement(s.node.EvidenceSource(), tenant, spec)
		if err != nil {
			return err
		}
		doc := st.JSON()
		if format == "csv" {
			doc = st.CSV()
		}
		out = &pb.UsageStatementResponse{Document: string(doc), Format: format}
		return nil
	})
	return out, err
}

// FairnessCertificate implements the client service, as UsageStatement.
func (s *ClientService) FairnessCertificate(ctx context.Context, req *pb.FairnessCertificateRequest) (*pb.FairnessCertificateResponse, error) {
	var out *pb.FairnessCertificateResponse
	err := s.evidenceCall(ctx, req.Tenant, req.Window, func(tenant string, spec snapshot.WindowSpec) error {
		cert, err := snapshot.Certificate(s.node.EvidenceSource(), tenant, spec)
		if err != nil {
			return err
		}
		out = &pb.FairnessCertificateResponse{Document: string(cert.JSON()), Digest: cert.Digest}
		return nil
	})
	return out, err
}

// placeToPB is a queued job's place in line (nil when it has none).
func placeToPB(f *fsm.FSM, id sfq.JobID) *pb.PlaceInLine {
	pl, ok, err := f.Place(id, fsm.PlaceLimit)
	if !ok || err != nil {
		return nil
	}
	out := &pb.PlaceInLine{Ahead: pl.Ahead, OwnAhead: pl.Own, Complete: pl.Complete, Share: pl.Share}
	if pl.Estimated {
		out.EstimatedStartMs, out.RatePerMinute = int64(pl.EstimatedStart), pl.RatePerMinute
	}
	return out
}

// PlaceText says a place in line in a sentence (the explain paragraph's
// last), of a job of size sz; the client's CLI prints the same.
func PlaceText(pl *pb.PlaceInLine, sz string, now *pb.ClockNow) string {
	if pl == nil {
		return ""
	}
	ahead := strconv.FormatUint(pl.Ahead, 10)
	if !pl.Complete {
		ahead = "at least " + ahead
	}
	jobs := "jobs"
	if pl.Ahead == 1 && pl.Complete {
		jobs = "job"
	}
	s := fmt.Sprintf("Place in line: %s %s go before it on the workers of size %s (%d of its own tenant's)", ahead, jobs, sz, pl.OwnAhead)
	if pl.EstimatedStartMs != 0 {
		s += fmt.Sprintf("; it may start %s (an estimate, at the pace of the last 10 minutes)", wire.When(now, pl.EstimatedStartMs))
	}
	return s + "."
}
