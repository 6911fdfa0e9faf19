package snapshot

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Resources in the audit (feature level 8, SPEC §8 rule 13).
//
// A "dispatch" fact of a job that uses resources lists them (its Uses):
// each one's units after the dispatch, beside its capacity, and its
// tenant's units beside the tenant's limit in force. A "resources" fact
// follows every command after which the units some resource's live jobs
// hold, or its settings, changed: each resource as the state counts it,
// and the live jobs of the job table that use it (its holders), read
// apart from the counters.

// ResourceUseFact is one resource a dispatched job uses: its name and
// the job's Units; Held, the units live jobs hold after the dispatch, and
// the Capacity in force; TenantHeld, the units its tenant's live jobs
// hold after it, and the tenant's limit in force (TenantMax; nil: none).
type ResourceUseFact struct {
	Resource   string  `json:"resource"`
	Units      uint32  `json:"units"`
	Held       uint64  `json:"held"`
	Capacity   uint32  `json:"capacity"`
	TenantHeld uint32  `json:"tenant_held"`
	TenantMax  *uint32 `json:"tenant_max,omitempty"`
}

// ResourceFact is one resource after a command (a "resources" fact
// lists every declared resource): its Name, Capacity and TenantMax (nil:
// none), Held as the state counts it, and Holders, the live jobs of the
// job table that use it, as "JOB/ATTEMPT/UNITS" by job ID.
type ResourceFact struct {
	Name      string   `json:"name"`
	Capacity  uint32   `json:"capacity"`
	TenantMax *uint32  `json:"tenant_max,omitempty"`
	Held      uint64   `json:"held"`
	Holders   []string `json:"holders,omitempty"`
}

// tenantMaxFact is a limit per tenant as a fact says it (nil: none).
func tenantMaxFact(m uint32) *uint32 {
	if m == sfq.NoTenantMax {
		return nil
	}
	return &m
}

// usesFacts are the resources dispatched job j uses, read after its
// dispatch.
func usesFacts(s *sfq.Scheduler, j *sfq.Job) []ResourceUseFact {
	var out []ResourceUseFact
	o := s.Owner(j.Tenant)
	for _, u := range j.Uses() {
		info, ok := s.Resource(u.Resource)
		if !ok {
			out = append(out, ResourceUseFact{Resource: u.Resource, Units: u.Units})
			continue
		}
		held, m, _ := s.TenantHeld(o, u.Resource)
		out = append(out, ResourceUseFact{Resource: u.Resource, Units: u.Units, Held: info.Held, Capacity: info.Capacity, TenantHeld: held, TenantMax: tenantMaxFact(m)})
	}
	return out
}

// resourceMark is what the audit compares before and after a command:
// each declared resource's name, settings and units held.
func resourceMark(s *sfq.Scheduler) []ResourceFact {
	var out []ResourceFact
	for _, name := range s.ResourceNames() {
		if info, ok := s.Resource(name); ok {
			out = append(out, ResourceFact{Name: name, Capacity: info.Capacity, TenantMax: tenantMaxFact(info.TenantMax), Held: info.Held})
		}
	}
	return out
}

// sameMark reports whether two marks are equal.
func sameMark(a, b []ResourceFact) bool {
	return slices.EqualFunc(a, b, func(x, y ResourceFact) bool {
		return x.Name == y.Name && x.Capacity == y.Capacity && x.Held == y.Held && (x.TenantMax == nil) == (y.TenantMax == nil) &&
			(x.TenantMax == nil || *x.TenantMax == *y.TenantMax)
	})
}

// resourcesFact is the "resources" fact after command c at index, when
// it changed a resource's units or settings (mark: before it), or nil.
func resourcesFact(s *sfq.Scheduler, index uint64, c *clusterpb.Command, mark []ResourceFact) *AuditFact {
	after := resourceMark(s)
	_, set := c.Cmd.(*clusterpb.Command_ResourceSet)
	if sameMark(mark, after) && !set {
		return nil
	}
	if len(after) > 0 {
		at := map[string]int{}
		for i, r := range after {
			at[r.Name] = i
		}
		s.Jobs(0, func(j *sfq.Job) bool {
			if !j.State.Live() || !j.UsesResources() {
				return true
			}
			for _, u := range j.Uses() {
				if i, ok := at[u.Resource]; ok {
					after[i].Holders = append(after[i].Holders, fmt.Sprintf("%d/%d/%d", j.ID, j.Attempt, u.Units))
				}
			}
			return true
		})
	}
	return &AuditFact{Kind: "resources", Index: index, Resources: after}
}

// standingReservations lists the reservations that stand in s, by
// resource name, as "RESOURCE/JOB/SINCE".
func standingReservations(s *sfq.Scheduler) []string {
	var out []string
	for _, name := range s.ResourceNames() {
		if info, ok := s.Resource(name); ok && info.Reserved != 0 {
			out = append(out, name+"/"+strconv.FormatUint(uint64(info.Reserved), 10)+"/"+strconv.FormatInt(int64(info.ReservedSince), 10))
		}
	}
	return out
}
