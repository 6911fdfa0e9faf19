package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Bulk commands of feature level 5 (SPEC §3 "Dead letters and redrive"):
// Redrive, CancelJobs and Purge of one tenant's jobs, by IDs or by a
// filter evaluated here, inside Apply, so that every node picks the same
// jobs. A call takes the first MaxBulkJobs matches by ascending ID and
// names the continuation; a request key makes a retry (after a lost
// leadership) return the first call's continuation instead of applying
// it twice.

// BulkOp is one of the bulk commands.
type BulkOp uint8

// The bulk commands.
const (
	BulkRedrive BulkOp = iota + 1
	BulkCancel
	BulkPurge
)

func (o BulkOp) String() string {
	switch o {
	case BulkRedrive:
		return "Redrive"
	case BulkCancel:
		return "CancelJobs"
	case BulkPurge:
		return "Purge"
	}
	return fmt.Sprintf("bulk(%d)", uint8(o))
}

// MaxBulkJobs bounds the jobs one bulk command acts on (its IDs, or the
// matches of its filter).
const MaxBulkJobs = 10_000

// maxBulkScan bounds the jobs one filtered call examines, so that one
// entry never pauses Apply long; the continuation picks up where it
// stopped.
const maxBulkScan = 1_000_000

// bulkKeyBit marks the request keys of bulk commands in the idempotency
// key table: their tenant field is the tenant's index with this bit set,
// so they never meet a submit's key.
const bulkKeyBit = 1 << 31

// BulkItem is what a bulk command did to one job.
type BulkItem struct {
	Job  sfq.JobID
	Done bool
	// State is the job's state after the command (StateNone: purged, or
	// no such job of the tenant).
	State  sfq.State
	Reason string // why it was skipped
}

// BulkResult is the outcome of a bulk command.
type BulkResult struct {
	Items         []BulkItem
	Next          sfq.JobID // the continuation: the first ID to look at next; 0 = done
	Done, Skipped uint64
	// Duplicate: a retry of a request already applied; Items is empty and
	// Next is the first call's.
	Duplicate bool
	// Stopped says why the command stopped before its last job (the
	// tenant's max_queued); Next is the job it stopped at.
	Stopped string
}

// BulkItemsToPB converts per-job results.
func BulkItemsToPB(items []BulkItem) []*pb.BulkItem {
	out := make([]*pb.BulkItem, len(items))
	for i, it := range items {
		out[i] = &pb.BulkItem{JobId: uint64(it.Job), Done: it.Done, Reason: it.Reason}
		if it.State != sfq.StateNone {
			out[i].State = it.State.String()
		}
	}
	return out
}

// states returns the states op acts on.
func (o BulkOp) allows(s sfq.State) bool {
	switch o {
	case BulkRedrive:
		return s.DeadLetter()
	case BulkCancel:
		return s == sfq.Queued || s == sfq.Scheduled || s.Live()
	case BulkPurge:
		return s.Terminal()
	}
	return false
}

func (o BulkOp) stateNames() string {
	switch o {
	case BulkRedrive:
		return "failed, timed_out, expired or cancelled"
	case BulkCancel:
		return "queued, scheduled, assigned or running"
	}
	return "completed, failed, cancelled, timed_out or expired"
}

// bulkFilter is a parsed JobFilter.
type bulkFilter struct {
	states   uint32 // bit s: state s matches
	typ      string
	group    string
	from, to sfq.Time
	pool     string // "" = any
}

func (b *bulkFilter) match(j *sfq.Job) bool {
	return b.states&(1<<j.State) != 0 &&
		(b.typ == "" || j.Type() == b.typ) &&
		(b.group == "" || j.Group() == b.group) &&
		(b.from == 0 || j.SubmittedAt >= b.from) &&
		(b.to == 0 || j.SubmittedAt < b.to)
}

func parseFilter(op BulkOp, f *pb.JobFilter) (bulkFilter, error) {
	var b bulkFilter
	for _, n := range f.States {
		s, err := sfq.ParseState(n)
		if err != nil || !op.allows(s) {
			return b, invalidf("filter.states", "%q is not a state %s takes (want %s)", n, op, op.stateNames())
		}
		b.states |= 1 << s
	}
	if len(f.States) == 0 {
		for s := sfq.Queued; s <= sfq.Expired; s++ {
			if op.allows(s) {
				b.states |= 1 << s
			}
		}
	}
	if len(f.JobType) > sfq.MaxNameLen {
		return b, invalidf("filter.job_type", "%d bytes, at most %d", len(f.JobType), sfq.MaxNameLen)
	}
	if f.Group != "" {
		if err := sfq.ValidateGroupName(f.Group); err != nil {
			return b, invalidf("filter.group", "%s", err)
		}
	}
	if f.SubmittedFromMs < 0 || f.SubmittedToMs < 0 || (f.SubmittedToMs != 0 && f.SubmittedToMs <= f.SubmittedFromMs) {
		return b, invalidf("", "filter submit times [%d, %d) ms: want 0 <= from < to (0 = no bound)", f.SubmittedFromMs, f.SubmittedToMs)
	}
	if f.Pool != "" {
		if err := sfq.ValidatePoolName(f.Pool); err != nil {
			return b, invalidf("filter.pool", "%s", err)
		}
	}
	b.typ, b.group, b.pool = f.JobType, f.Group, f.Pool
	b.from, b.to = sfq.Time(f.SubmittedFromMs), sfq.Time(f.SubmittedToMs)
	return b, nil
}

// ValidateBulk checks a bulk command's own fields and names the field in
// its error: the edge and Apply both call it.
func ValidateBulk(op BulkOp, c *clusterpb.BulkJobs) error {
	if c.Tenant == "" {
		return invalidf("tenant", "required")
	}
	switch {
	case len(c.Jobs) > 0 && c.Filter != nil:
		return invalidf("", "jobs and filter: give one, not both")
	case len(c.Jobs) == 0 && c.Filter == nil:
		return invalidf("", "jobs or filter: one is required")
	case len(c.Jobs) > MaxBulkJobs:
		return invalidf("jobs", "%d IDs, at most %d a call", len(c.Jobs), MaxBulkJobs)
	case c.After != 0 && c.Filter == nil:
		return invalidf("after", "a continuation needs a filter")
	case c.MaxAttempts != 0 && op != BulkRedrive:
		return invalidf("max_attempts", "only a redrive sets it")
	case c.MaxAttempts > sfq.MaxMaxAttempts:
		return invalidf("max_attempts", "%d (want 1..%d, or 0 to keep each job's)", c.MaxAttempts, sfq.MaxMaxAttempts)
	case c.SinceMs < 0 || (c.SinceMs != 0 && c.Filter == nil):
		return invalidf("since_ms", "%d (want a positive duration, with a filter)", c.SinceMs)
	case len(c.RequestKey) > sfq.MaxNameLen:
		return invalidf("request_key", "%d bytes, at most %d", len(c.RequestKey), sfq.MaxNameLen)
	}
	for i, id := range c.Jobs {
		if id == 0 {
			return invalidf("", "jobs[%d]: job ID 0", i)
		}
	}
	if c.Filter != nil {
		if _, err := parseFilter(op, c.Filter); err != nil {
			return err
		}
	}
	return nil
}

// bulkDigest hashes a deterministic encoding of every field of the
// request: a retry with the same key is the same request only if equal.
func bulkDigest(op BulkOp, c *clusterpb.BulkJobs) [16]byte {
	b := []byte{'b', byte(op)}
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(c.Tenant)
	str(c.RequestKey)
	b = binary.AppendUvarint(b, uint64(len(c.Jobs)))
	for _, id := range c.Jobs {
		b = binary.AppendUvarint(b, id)
	}
	if f := c.Filter; f != nil {
		b = append(b, 'f')
		b = binary.AppendUvarint(b, uint64(len(f.States)))
		for _, s := range f.States {
			str(s)
		}
		str(f.JobType)
		str(f.Group)
		if f.Pool != "" {
			b = append(b, 'p')
			str(f.Pool)
		}
		from := f.SubmittedFromMs
		if c.SinceMs != 0 {
			from = -c.SinceMs // the caller's relative bound, not where "now" put it
		}
		b = binary.AppendVarint(b, from)
		b = binary.AppendVarint(b, f.SubmittedToMs)
	}
	b = binary.AppendUvarint(b, c.After)
	b = binary.AppendUvarint(b, uint64(c.MaxAttempts))
	sum := sha256.Sum256(b)
	var d [16]byte
	copy(d[:], sum[:])
	return d
}

// SelectBulk returns the jobs a bulk command looks at, in order: its IDs,
// or the first MaxBulkJobs matches of its filter from After on, with the
// continuation (0: no match is left). The command must be valid.
func SelectBulk(sc *sfq.Scheduler, op BulkOp, c *clusterpb.BulkJobs) (ids []sfq.JobID, next sfq.JobID) {
	if c.Filter == nil {
		ids = make([]sfq.JobID, len(c.Jobs))
		for i, id := range c.Jobs {
			ids[i] = sfq.JobID(id)
		}
		return ids, 0
	}
	bf, _ := parseFilter(op, c.Filter)
	pid, known := sfq.PoolID(0), true
	if bf.pool != "" {
		pid, known = sc.PoolID(bf.pool)
		if !known {
			return nil, 0 // an unknown pool has no job (Apply refused it first)
		}
	}
	scanned := 0
	sc.TenantJobs(c.Tenant, sfq.JobID(c.After), func(j *sfq.Job) bool {
		scanned++
		if !bf.match(j) || (bf.pool != "" && sc.LanePool(j.Tenant) != pid) {
			if scanned >= maxBulkScan {
				next = j.ID + 1
				return false
			}
			return true
		}
		if len(ids) == MaxBulkJobs {
			next = j.ID
			return false
		}
		ids = append(ids, j.ID)
		return true
	})
	return ids, next
}

// DryRun lists what a bulk command would do now, without doing it: each
// job it would act on, and those of its IDs it would skip with the
// reason. The quota, class ceiling and max_groups are Apply's to check.
func DryRun(sc *sfq.Scheduler, op BulkOp, c *clusterpb.BulkJobs) *BulkResult {
	ids, next := SelectBulk(sc, op, c)
	res := &BulkResult{Next: next}
	for _, id := range ids {
		it := BulkItem{Job: id}
		if j, ok := sc.TenantJob(c.Tenant, id); !ok {
			it.Reason = "not found"
		} else if it.State = j.State; !op.allows(j.State) {
			it.Reason = notTaken(op, j.State)
		} else {
			it.Done = true
		}
		res.add(it)
	}
	return res
}

func notTaken(op BulkOp, s sfq.State) string {
	return fmt.Sprintf("is %s (%s takes %s jobs)", s, op, op.stateNames())
}

func (r *BulkResult) add(it BulkItem) {
	r.Items = append(r.Items, it)
	if it.Done {
		r.Done++
	} else {
		r.Skipped++
	}
}

func (f *FSM) applyBulk(op BulkOp, c *clusterpb.BulkJobs) Result {
	if r := f.checkBulk(op, c); r.Refused() || r.Bulk != nil {
		return r
	}
	ti, _ := f.sched.TenantIndex(c.Tenant)
	ref, digest := keyRef{ti | bulkKeyBit, c.RequestKey}, bulkDigest(op, c)
	ids, next := SelectBulk(f.sched, op, c)
	res := &BulkResult{Next: next}
	for i, id := range ids {
		j, ok := f.sched.TenantJob(c.Tenant, id)
		if !ok {
			res.add(BulkItem{Job: id, Reason: "not found"})
			continue
		}
		if !op.allows(j.State) {
			res.add(BulkItem{Job: id, State: j.State, Reason: notTaken(op, j.State)})
			continue
		}
		switch op {
		case BulkRedrive:
			if t, _ := f.sched.TenantTotals(ti); f.quotas().Room(f.sched, ti, &t, len(j.Payload())) != "" {
				res.Stopped = f.quotas().Room(f.sched, ti, &t, len(j.Payload())) // kept in the result
				if c.Filter != nil {
					res.Next = id // the rest waits for the next call
				} else {
					for _, rest := range ids[i:] {
						res.add(BulkItem{Job: rest, Reason: res.Stopped})
					}
				}
				f.recordBulkKey(ref, digest, res.Next)
				return Result{Tenant: c.Tenant, Count: res.Done, Bulk: res}
			}
			res.add(f.redriveOne(id, c.MaxAttempts))
		case BulkCancel:
			res.add(f.cancelOne(id))
		case BulkPurge:
			it := BulkItem{Job: id, Done: true}
			if err := f.sched.Purge(id); err != nil {
				it = BulkItem{Job: id, State: j.State, Reason: reasonOf(err)}
			}
			res.add(it)
		}
	}
	f.recordBulkKey(ref, digest, res.Next)
	return Result{Tenant: c.Tenant, Count: res.Done, Bulk: res}
}

// recordBulkKey remembers a bulk request's key for the dedupe window, as
// a submit's, with the continuation it returned in place of a job.
func (f *FSM) recordBulkKey(ref keyRef, digest [16]byte, next sfq.JobID) {
	if ref.key == "" || f.cfg.DedupeWindowMs <= 0 {
		return
	}
	seq := f.nextKey
	f.nextKey++
	f.keys.Put(seq, keyEntry{Seq: seq, Tenant: ref.tenant, Key: ref.key, Job: next, Expires: f.clock + sfq.Time(f.cfg.DedupeWindowMs), Digest: digest})
	f.keyIndex.put(&f.keys, ref, seq)
}

func (f *FSM) redriveOne(id sfq.JobID, maxAttempts uint32) BulkItem {
	ch, err := f.sched.Redrive(f.clock, id, maxAttempts)
	if err != nil {
		return BulkItem{Job: id, State: ch.From, Reason: reasonOf(err)}
	}
	j, _ := f.sched.Job(id)
	f.emit(EvRedriven, &j, ReasonNone)
	if j.State == sfq.Scheduled {
		f.emit(EvScheduled, &j, ReasonNone) // until its delay, counted again, is due
	} else {
		f.emit(EvQueued, &j, ReasonNone)
	}
	f.observe(j.Tenant)
	return BulkItem{Job: id, Done: true, State: j.State}
}

func (f *FSM) cancelOne(id sfq.JobID) BulkItem {
	ch, err := f.sched.Cancel(f.clock, id)
	j, _ := f.sched.Job(id)
	switch {
	case err != nil:
		return BulkItem{Job: id, State: j.State, Reason: reasonOf(err)}
	case ch.Outcome == sfq.Duplicate:
		return BulkItem{Job: id, State: j.State, Reason: "cancel already requested"}
	}
	f.emitChange(ch, ReasonRequested)
	f.observe(ch.Tenant)
	return BulkItem{Job: id, Done: true, State: j.State}
}

// reasonOf is a refusal's message, an item's reason.
func reasonOf(err error) string { return refuse(err).Msg }

// pruneJobs removes ended jobs past their retention: completed jobs by
// the job retention, dead letters by theirs, then the oldest dead letters
// of every tenant over its bounds (or, with everyEnded, every ended job by
// the job retention: the meaning below level 5).
func (f *FSM) pruneJobs(limit int, everyEnded bool) int {
	cutoff := f.clock - sfq.Time(f.cfg.JobRetentionMs)
	if everyEnded {
		return f.sched.Prune(cutoff, limit)
	}
	n := f.sched.PruneEnded(cutoff, f.clock-sfq.Time(f.cfg.DeadLetterRetentionMs), limit)
	if n < limit {
		n += f.sched.PruneDeadBounds(f.cfg.DeadLetterMaxJobs, f.cfg.DeadLetterMaxBytes, limit-n)
	}
	return n
}

// jobsPruneDue reports whether pruneJobs at now would find anything.
func (f *FSM) jobsPruneDue(now sfq.Time) bool {
	if pruneEveryEndedByJobRetention(f.level) {
		at, ok := f.sched.OldestEnded()
		return ok && at < now-sfq.Time(f.cfg.JobRetentionMs)
	}
	if at, ok := f.sched.OldestCompleted(); ok && at < now-sfq.Time(f.cfg.JobRetentionMs) {
		return true
	}
	if at, ok := f.sched.OldestDead(); ok && at < now-sfq.Time(f.cfg.DeadLetterRetentionMs) {
		return true
	}
	return f.sched.DeadOverBounds(f.cfg.DeadLetterMaxJobs, f.cfg.DeadLetterMaxBytes)
}

// String prints the result in full (tests compare results as text).
func (r *BulkResult) String() string {
	if r == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{Items:%v Next:%d Done:%d Skipped:%d Duplicate:%v Stopped:%q}", r.Items, r.Next, r.Done, r.Skipped, r.Duplicate, r.Stopped)
}

// BulkOf returns the operation and arguments of a bulk command (Redrive,
// CancelJobs or Purge); ok is false for any other.
func BulkOf(c *clusterpb.Command) (op BulkOp, args *clusterpb.BulkJobs, ok bool) {
	switch x := c.GetCmd().(type) {
	case *clusterpb.Command_Redrive:
		return BulkRedrive, x.Redrive, true
	case *clusterpb.Command_CancelJobs:
		return BulkCancel, x.CancelJobs, true
	case *clusterpb.Command_Purge:
		return BulkPurge, x.Purge, true
	}
	return 0, nil, false
}
