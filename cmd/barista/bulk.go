package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/internal/termtext"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// bulkFlags are the flags redrive, cancel --filter and purge share: which
// of a tenant's jobs a bulk call takes.
type bulkFlags struct {
	tenantFlags
	states string
	typ    string
	group  string
	pool   string
	since  time.Duration
	ids    string
	filter bool
	dryRun bool
}

func (b *bulkFlags) register(fs *flag.FlagSet, statesHelp string) {
	b.tenantFlags.register(fs)
	fs.StringVar(&b.states, "state", "", "only jobs in these `STATES` (comma-separated; "+statesHelp+")")
	fs.StringVar(&b.typ, "type", "", "only jobs of this job `TYPE`")
	fs.StringVar(&b.group, "group", "", "only jobs of this `GROUP`")
	fs.StringVar(&b.pool, "pool", "", "only jobs of this `POOL` (feature level 6)")
	durFlag(fs, &b.since, "since", 0, time.Millisecond, 10*365*24*time.Hour, "", "only jobs submitted within this `DURATION` before now (cluster time)")
	fs.StringVar(&b.ids, "ids", "", "these job `IDS` (comma-separated, at most 10000) instead of a filter")
	fs.BoolVar(&b.dryRun, "dry-run", false, "list the jobs the call would take, change nothing")
}

// filtered reports whether a filter flag was given.
func (b *bulkFlags) filtered() bool {
	return b.states != "" || b.typ != "" || b.group != "" || b.pool != "" || b.since != 0
}

// request builds the first request of a bulk call.
func (b *bulkFlags) request() (*pb.BulkJobsRequest, error) {
	req := &pb.BulkJobsRequest{Tenant: b.tenant, DryRun: b.dryRun}
	if b.ids != "" {
		if b.filtered() {
			return nil, usageError("--ids and a filter (--state, --type, --group, --pool, --since): give one, not both")
		}
		for _, s := range strings.Split(b.ids, ",") {
			id, err := parseJobID(strings.TrimSpace(s))
			if err != nil {
				return nil, usageError("--ids: bad job id %q", s)
			}
			req.JobIds = append(req.JobIds, id)
		}
		return req, nil
	}
	if b.pool != "" {
		if err := sfq.ValidatePoolName(b.pool); err != nil {
			return nil, usageError("--pool: %v", err)
		}
	}
	req.Filter = &pb.JobFilter{JobType: b.typ, Group: b.group, Pool: b.pool}
	if b.states != "" {
		for _, s := range strings.Split(b.states, ",") {
			req.Filter.States = append(req.Filter.States, strings.TrimSpace(s))
		}
	}
	req.SinceMs = b.since.Milliseconds()
	return req, nil
}

// requestKey is a fresh key for one page of a bulk call: the client
// retries the page with it after a failure, and the cluster applies it
// once.
func requestKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "cli-" + hex.EncodeToString(b[:])
}

// bulkTotals are the sums over every page of a bulk call.
type bulkTotals struct {
	Done    uint64         `json:"done"`
	Skipped uint64         `json:"skipped"`
	Pages   int            `json:"pages"`
	Retried int            `json:"retried_pages,omitempty"`
	Stopped string         `json:"stopped,omitempty"`
	DryRun  bool           `json:"dry_run,omitempty"`
	Items   []bulkItemJSON `json:"items"`
}

type bulkItemJSON struct {
	Job    uint64 `json:"job_id"`
	Done   bool   `json:"done"`
	State  string `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// runBulk calls a bulk RPC page after page until the cluster says it is
// done, printing each job's result (or, with --json, everything at the
// end) and the totals. verb names what was done ("redriven").
func runBulk(env *cmdEnv, b *bulkFlags, verb string, call func(cl *client.Client, req *pb.BulkJobsRequest) (*pb.BulkJobsResponse, error)) error {
	req, err := b.request()
	if err != nil {
		return err
	}
	var t bulkTotals
	t.DryRun = b.dryRun
	t.Items = []bulkItemJSON{}
	if b.dryRun {
		verb = "would be " + verb
	}
	err = b.with(func(cl *client.Client) error {
		for {
			if !b.dryRun {
				req.RequestKey = requestKey()
			}
			resp, err := call(cl, req)
			if wait, ok := client.RetryAfter(err); ok && errors.Is(err, client.ErrRateLimited) {
				// The caller's write rate, which a page pays by its jobs
				// (docs/api.md, "Bulk calls"): nothing was done; the page
				// goes again once it may.
				time.Sleep(wait)
				continue
			}
			if err != nil {
				return err
			}
			t.Pages++
			t.Done += resp.Done
			t.Skipped += resp.Skipped
			if resp.Duplicate {
				t.Retried++
			}
			for _, it := range resp.Items {
				t.Items = append(t.Items, bulkItemJSON{Job: it.JobId, Done: it.Done, State: it.State, Reason: it.Reason})
				if b.json {
					continue
				}
				if it.Done {
					fmt.Fprintf(env.stdout, "job %d: %s (%s)\n", it.JobId, verb, orDeleted(it.State))
				} else {
					fmt.Fprintf(env.stdout, "job %d: skipped: %s\n", it.JobId, termtext.Safe(it.Reason, false))
				}
			}
			if resp.Stopped != "" {
				t.Stopped = resp.Stopped
				return nil
			}
			if resp.NextPageToken == "" {
				return nil
			}
			// The next page looks at the same jobs: the absolute bound
			// the first page's since became.
			req.PageToken = resp.NextPageToken
			if req.Filter != nil && req.SinceMs != 0 {
				req.Filter.SubmittedFromMs, req.SinceMs = resp.SubmittedFromMs, 0
			}
		}
	})
	if err != nil {
		return err
	}
	if b.json {
		if err := printJSON(env.stdout, t); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.stdout, "%s: %d, skipped: %d (%d calls)\n", verb, t.Done, t.Skipped, t.Pages)
		if t.Retried > 0 {
			fmt.Fprintf(env.stdout, "%d calls were retries of calls already applied: their jobs are not listed above\n", t.Retried)
		}
	}
	if t.Stopped != "" {
		return fmt.Errorf("stopped: %s", t.Stopped)
	}
	return nil
}

func orDeleted(state string) string {
	if state == "" {
		return "deleted"
	}
	return state
}
