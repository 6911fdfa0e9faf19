// Package joblist pages through a tenant's jobs as ListJobs answers:
// the page tokens (up in ID order, or down from the newest) and one page
// read from the state, of one state and one pool if asked, bounded by a
// count and by its encoded bytes. rpc's ListJobs and bulk calls, and the
// console, use it.
package joblist

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/baristahq/barista/internal/apiview"
	"github.com/baristahq/barista/internal/pbcodec"
	"github.com/baristahq/barista/internal/text"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// PageToken encodes where the next page of ListJobs starts.
func PageToken(next sfq.JobID) string { return "p" + strconv.FormatUint(uint64(next), 10) }

// DownToken encodes where the next page of a newest-first list starts
// (that job, then older ones).
func DownToken(next sfq.JobID) string { return "d" + strconv.FormatUint(uint64(next), 10) }

// ParseListToken reads a ListJobs page token: "p" tokens go up, "d"
// tokens down; a token of the other direction is refused. Its error is
// a *text.InvalidError of field page_token.
func ParseListToken(tok string, down bool) (sfq.JobID, error) {
	if !down || tok == "" {
		return ParsePageToken(tok)
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(tok, "d"), 10, 64)
	if err != nil || !strings.HasPrefix(tok, "d") || v == 0 {
		return 0, text.Invalidf("page_token", "%q is not a token this server issued for a newest-first list", tok)
	}
	return sfq.JobID(v), nil
}

// ParsePageToken reads a PageToken (its error as ParseListToken's).
func ParsePageToken(tok string) (sfq.JobID, error) {
	if tok == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(tok, "p"), 10, 64)
	if err != nil || !strings.HasPrefix(tok, "p") || v == 0 {
		return 0, text.Invalidf("page_token", "%q is not a token this server issued", tok)
	}
	return sfq.JobID(v), nil
}

// Page reads one page of ListJobs from the state: the jobs of tenant
// (every tenant's if empty) from ID from on, of one state unless state is
// 0 and of one pool unless pool is "" (the caller checked that it
// exists), at most size of them and no more than maxBytes once encoded (but
// never none while one remains). The next page token names the first job
// left out, so the next page starts exactly there. ok is false when the
// tenant does not exist. With down the page goes from ID from (0: the
// newest) down, and its token goes on downwards.
func Page(sc *sfq.Scheduler, tenant string, state sfq.State, pool string, from sfq.JobID, down bool, size int, payload bool, maxBytes int) (out *pb.ListJobsResponse, ok bool) {
	pid, _ := sc.PoolID(pool)
	out = &pb.ListJobsResponse{}
	total := 0
	walk, token := sc.TenantJobs, PageToken
	if down {
		walk, token = sc.TenantJobsDown, DownToken
	}
	ok = walk(tenant, from, func(j *sfq.Job) bool {
		if (state != 0 && j.State != state) || (pool != "" && sc.LanePool(j.Tenant) != pid) {
			return true
		}
		if len(out.Jobs) == size {
			out.NextPageToken = token(j.ID)
			return false
		}
		pj := apiview.Job(sc, j, payload)
		// The bytes this job adds to the response: field tag, length, body.
		n := protowire.SizeTag(1) + protowire.SizeBytes(pbcodec.Size(pj))
		if len(out.Jobs) > 0 && total+n > maxBytes {
			out.NextPageToken = token(j.ID)
			return false
		}
		total += n
		out.Jobs = append(out.Jobs, pj)
		return true
	})
	return out, ok
}
