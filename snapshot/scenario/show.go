package scenario

// Handlers of the reading commands: show (a job, a tenant, a job type, a
// group, a pool, a tenant's lane in a pool) and explain.

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/baristahq/barista/sfq"
)

// show prints a job's, a tenant's or a job type's state:
//
//	job ID tenant=T state=S attempt=N failures=N cancel=R cpu=MS class=C est=MS est_source=S
//	tenant NAME tier=T tag=MS vnow=MS running=N queued=SM/MD/LG billed_cpu=MS zombie_cpu=MS failures=N
//	type TENANT TYPE ema=MS samples=N
func (rn *runner) show(pos []string, opts options) error {
	usage := fmt.Errorf("usage: show job ID | show tenant NAME [class=C] [pool=P] | show group TENANT GROUP [class=C] | show type TENANT TYPE | show pool NAME [class=C] | show worker ID | show kind TENANT|* KIND | show schedule TENANT NAME | show resource NAME")
	if len(pos) < 1 {
		return usage
	}
	switch pos[0] {
	case "worker":
		if len(pos) != 2 || len(opts) > 0 {
			return usage
		}
		return rn.showWorker(pos[1])
	case "kind":
		if len(pos) != 3 || len(opts) > 0 {
			return usage
		}
		return rn.showKind(pos[1], pos[2])
	case "schedule":
		if len(pos) != 3 || len(opts) > 0 {
			return usage
		}
		return rn.showSchedule(pos[1], pos[2])
	case "resource":
		if len(pos) != 2 || len(opts) > 0 {
			return usage
		}
		return rn.showResource(pos[1])
	case "job":
		if len(pos) != 2 || len(opts) > 0 {
			return usage
		}
		id, err := strconv.ParseUint(pos[1], 10, 64)
		if err != nil {
			return fmt.Errorf("bad job id %q", pos[1])
		}
		j, ok := rn.t.Job(sfq.JobID(id))
		if !ok {
			return fmt.Errorf("%w: %d", sfq.ErrUnknownJob, id)
		}
		line := map[string]any{"job": j.ID, "tenant": rn.t.TenantName(j.Tenant), "state": j.State.String(),
			"attempt": j.Attempt, "failures": j.Failures, "cancel": j.Cancel.String(), "cpu_ms": j.CPUMs,
			"class": j.Class.String(), "est_ms": j.EstCostMs, "est_source": j.EstSource.String()}
		// A scheduled job shows its due time, a job with an expiry its
		// expire_at; other lines keep their form.
		var extra string
		if due := j.DueAt(); due != 0 {
			line["due_ms"] = due
			extra += fmt.Sprintf(" due=%d", due)
		}
		if x := j.ExpireAt(); x != 0 {
			line["expire_at_ms"] = x
			extra += fmt.Sprintf(" expire_at=%d", x)
		}
		if r := j.Result; r != nil && r.Snoozes > 0 {
			line["snoozes"] = r.Snoozes
			extra += fmt.Sprintf(" snoozes=%d", r.Snoozes)
		}
		extra += jobForm(&j, line)
		if rn.opt.JSON {
			rn.emitJSON(line)
			return nil
		}
		fmt.Fprintf(rn.out, "job %d tenant=%s state=%s attempt=%d failures=%d cancel=%s cpu=%dms class=%s est=%dms est_source=%s%s\n",
			j.ID, line["tenant"], j.State, j.Attempt, j.Failures, j.Cancel, j.CPUMs, j.Class, j.EstCostMs, j.EstSource, extra)
		return nil
	case "type":
		if len(pos) != 3 || len(opts) > 0 {
			return usage
		}
		st, ok := rn.t.Estimate(pos[1], pos[2])
		if !ok {
			return fmt.Errorf("no estimate for tenant %q job type %q", pos[1], pos[2])
		}
		if rn.opt.JSON {
			rn.emitJSON(map[string]any{"tenant": pos[1], "type": st.Type, "ema_ms": st.EMAMs, "samples": st.Samples})
			return nil
		}
		fmt.Fprintf(rn.out, "type %s %s ema=%dms samples=%d\n", pos[1], st.Type, st.EMAMs, st.Samples)
		return nil
	case "group":
		if len(pos) != 3 {
			return usage
		}
		return rn.showGroup(pos[1], pos[2], opts)
	case "pool":
		if len(pos) != 2 {
			return usage
		}
		return rn.showPool(pos[1], opts)
	case "tenant":
	default:
		return usage
	}
	if len(pos) != 2 {
		return usage
	}
	class := sfq.ClassNormal
	pool, inPool := "", false
	for _, o := range opts {
		switch o.k {
		case "class":
			var err error
			if class, err = sfq.ParseClass(o.v); err != nil {
				return err
			}
		case "pool":
			pool, inPool = o.v, true
		default:
			return fmt.Errorf("unknown show tenant key %q", o.k)
		}
	}
	if inPool {
		return rn.showLane(pos[1], pool, class)
	}
	t, vnow, ok := rn.t.TenantState(pos[1], class)
	if !ok {
		return fmt.Errorf("%w: %q", sfq.ErrUnknownTenant, pos[1])
	}
	tag := t.Tag(class)
	if rn.opt.JSON {
		rn.emitJSON(map[string]any{"tenant": t.Name, "tier": t.Tier.String(), "class": class.String(), "tag_ms": json.RawMessage(tag.String()),
			"vnow_ms": json.RawMessage(vnow.String()), "running": t.Running, "queued": t.Queued,
			"billed_cpu_ms": t.Billing.CPUMs, "zombie_cpu_ms": t.Billing.ZombieCPUMs, "failures": t.Billing.Failures})
		return nil
	}
	fmt.Fprintf(rn.out, "tenant %s tier=%s tag=%s vnow=%s running=%d queued=%d/%d/%d billed_cpu=%dms zombie_cpu=%dms failures=%d\n",
		t.Name, t.Tier, tag, vnow, t.Running, t.Queued[sfq.SM], t.Queued[sfq.MD], t.Queued[sfq.LG],
		t.Billing.CPUMs, t.Billing.ZombieCPUMs, t.Billing.Failures)
	return nil
}

// showGroup prints "group TENANT GROUP cap=C tenant_cap=N|none limit=N|none
// running=N queued=N tag=MS gnow=MS": the admin's cap, the tenant's own,
// the cap in force, and (class=C, default normal) the group's tag and its
// tenant's group_now.
func (rn *runner) showGroup(tenant, group string, opts options) error {
	class := sfq.ClassNormal
	for _, o := range opts {
		if o.k != "class" {
			return fmt.Errorf("unknown show group key %q", o.k)
		}
		var err error
		if class, err = sfq.ParseClass(o.v); err != nil {
			return err
		}
	}
	t, _, ok := rn.t.TenantState(tenant, class)
	if !ok {
		return fmt.Errorf("%w: %q", sfq.ErrUnknownTenant, tenant)
	}
	g, ok := rn.t.Group(tenant, group)
	if !ok {
		return fmt.Errorf("tenant %q has no group %q (a group without jobs or settings is forgotten)", tenant, group)
	}
	own, limit := "none", "none"
	if g.TenantCap != 0 {
		own = strconv.FormatUint(uint64(g.TenantCap), 10)
	}
	if n := sfq.CapOf(&t, &g); n != 0 {
		limit = strconv.FormatUint(uint64(n), 10)
	}
	if rn.opt.JSON {
		rn.emitJSON(map[string]any{"tenant": tenant, "group": group, "class": class.String(), "cap": g.Cap.String(), "tenant_cap": own,
			"limit": limit, "running": g.Running, "queued": g.Queued, "tag_ms": json.RawMessage(g.Tag(class).String()),
			"gnow_ms": json.RawMessage(t.GroupNow(class).String())})
		return nil
	}
	fmt.Fprintf(rn.out, "group %s %s cap=%s tenant_cap=%s limit=%s running=%d queued=%d tag=%s gnow=%s\n",
		tenant, group, g.Cap, own, limit, g.Running, g.Queued, g.Tag(class), t.GroupNow(class))
	return nil
}

// explain prints why a job is where it is: "explain JOB reason=R" and the
// fields of that reason (sfq.Reason.Format).
func (rn *runner) explain(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: explain JOB")
	}
	id, err := jobID(args[0])
	if err != nil {
		return err
	}
	r, err := rn.t.Explain(id)
	if err != nil {
		return err
	}
	if rn.opt.JSON {
		line := map[string]any{"explain": uint64(id), "reason": r.Name()}
		switch r.Kind {
		case sfq.ReasonBehind:
			line["position"] = r.Position
		case sfq.ReasonCap:
			line["vertex"], line["current"], line["limit"] = r.Cap.String(), r.Current, r.Limit
		case sfq.ReasonWaiting:
			line["ahead"], line["tag_ms"], line["vnow_ms"] = r.Ahead, json.RawMessage(r.Tag.String()), json.RawMessage(r.VirtualNow.String())
		case sfq.ReasonAssigned, sfq.ReasonRunning:
			line["worker"] = r.Worker
		}
		rn.emitJSON(line)
		return nil
	}
	fmt.Fprintf(rn.out, "explain %d %s\n", id, r.Format())
	return nil
}

// showPool prints "pool NAME weights=W subscriptions=optional|required
// paused=yes|no vnow=MS scheduled=N queued=N running=N tenants=N": its
// settings, its pause, its virtual_now of class=C (default normal), its
// jobs, and the tenants that have used it.
func (rn *runner) showPool(name string, opts options) error {
	class := sfq.ClassNormal
	for _, o := range opts {
		if o.k != "class" {
			return fmt.Errorf("unknown show pool key %q", o.k)
		}
		var err error
		if class, err = sfq.ParseClass(o.v); err != nil {
			return err
		}
	}
	p, ok := rn.t.Pool(name)
	if !ok {
		return fmt.Errorf("%w: %q", sfq.ErrUnknownPool, name)
	}
	subs, paused := "optional", "no"
	if p.Required {
		subs = "required"
	}
	if p.Paused {
		paused = "yes"
	}
	vnow := p.VirtualNow[class]
	if rn.opt.JSON {
		rn.emitJSON(map[string]any{"pool": p.Name, "weights": p.Weights.String(), "subscriptions": subs, "paused": p.Paused, "class": class.String(),
			"vnow_ms": json.RawMessage(vnow.String()), "scheduled": p.Scheduled, "queued": p.Queued, "running": p.Running, "tenants": p.Lanes})
		return nil
	}
	fmt.Fprintf(rn.out, "pool %s weights=%s subscriptions=%s paused=%s vnow=%s scheduled=%d queued=%d running=%d tenants=%d\n",
		p.Name, p.Weights, subs, paused, vnow, p.Scheduled, p.Queued, p.Running, p.Lanes)
	return nil
}

// showLane prints a tenant's line for one pool: the tenant line's fields
// as that pool holds them (its tag and usage there, that pool's
// virtual_now, its jobs and billing there), then "pool=P burst=N|none".
func (rn *runner) showLane(tenant, pool string, class sfq.Class) error {
	t, vnow, burst, subscribed, ok := rn.t.LaneState(tenant, pool, class)
	if !ok {
		if _, known := rn.t.Pool(pool); !known {
			return fmt.Errorf("%w: %q", sfq.ErrUnknownPool, pool)
		}
		return fmt.Errorf("%w: %q", sfq.ErrUnknownTenant, tenant)
	}
	b := "none"
	if subscribed {
		b = strconv.FormatUint(uint64(burst), 10)
	}
	tag := t.Tag(class)
	if rn.opt.JSON {
		rn.emitJSON(map[string]any{"tenant": t.Name, "pool": pool, "tier": t.Tier.String(), "class": class.String(), "tag_ms": json.RawMessage(tag.String()),
			"vnow_ms": json.RawMessage(vnow.String()), "running": t.Running, "queued": t.Queued,
			"billed_cpu_ms": t.Billing.CPUMs, "zombie_cpu_ms": t.Billing.ZombieCPUMs, "failures": t.Billing.Failures, "burst": b})
		return nil
	}
	fmt.Fprintf(rn.out, "tenant %s tier=%s tag=%s vnow=%s running=%d queued=%d/%d/%d billed_cpu=%dms zombie_cpu=%dms failures=%d pool=%s burst=%s\n",
		t.Name, t.Tier, tag, vnow, t.Running, t.Queued[sfq.SM], t.Queued[sfq.MD], t.Queued[sfq.LG],
		t.Billing.CPUMs, t.Billing.ZombieCPUMs, t.Billing.Failures, pool, b)
	return nil
}

// place prints a queued job's place in line: "place JOB ahead=N own=M"
// (and " complete=false" past the count's limit), or "place JOB none".
func (rn *runner) place(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: place JOB")
	}
	id, err := jobID(args[0])
	if err != nil {
		return err
	}
	pl, ok, err := rn.t.Place(rn.now, id)
	if err != nil {
		return err
	}
	if rn.opt.JSON {
		line := map[string]any{"place": uint64(id), "none": !ok}
		if ok {
			line = map[string]any{"place": uint64(id), "ahead": pl.Ahead, "own": pl.Own, "complete": pl.Complete}
		}
		rn.emitJSON(line)
		return nil
	}
	if !ok {
		fmt.Fprintf(rn.out, "place %d none\n", id)
		return nil
	}
	fmt.Fprintf(rn.out, "place %d ahead=%d own=%d", id, pl.Ahead, pl.Own)
	if !pl.Complete {
		fmt.Fprint(rn.out, " complete=false")
	}
	fmt.Fprintln(rn.out)
	return nil
}
