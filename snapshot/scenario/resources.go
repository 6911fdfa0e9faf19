package scenario

// Resources in scripts (SPEC §3 "Resources", feature level 8): resource
// NAME capacity=N [tenant_max=M|none], resource NAME tenant=T max=M|none,
// resource delete NAME, submit ... uses=R:K,... and show resource NAME.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// resource runs a resource line.
func (rn *runner) resource(pos []string, opts options) error {
	usage := fmt.Errorf("usage: resource NAME capacity=N [tenant_max=M|none] | resource NAME tenant=T max=M|none | resource delete NAME")
	switch {
	case len(pos) == 2 && pos[0] == "delete" && len(opts) == 0:
		return rn.t.DeleteResource(rn.now, pos[1])
	case len(pos) != 1:
		return usage
	}
	name := pos[0]
	if tenant, ok := opts.get("tenant"); ok {
		v, ok := opts.get("max")
		if !ok || len(opts) != 2 {
			return usage
		}
		m, err := sfq.ParseTenantMax(v)
		if err != nil {
			return err
		}
		return rn.t.SetResourceLimit(rn.now, name, tenant, m)
	}
	spec := sfq.ResourceSpec{Name: name, TenantMax: sfq.NoTenantMax}
	v, ok := opts.get("capacity")
	if !ok {
		return usage
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return fmt.Errorf("bad capacity %q", v)
	}
	spec.Capacity = uint32(n)
	for _, o := range opts {
		switch o.k {
		case "capacity":
		case "tenant_max":
			if spec.TenantMax, err = sfq.ParseTenantMax(o.v); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown resource key %q", o.k)
		}
	}
	return rn.t.SetResource(rn.now, spec)
}

// showResource prints "resource NAME capacity=N tenant_max=M|none held=H
// users=U queued=Q reserved=JOB|none", then each tenant's own limit as
// TENANT=HELD/MAX.
func (rn *runner) showResource(name string) error {
	r, ok := rn.t.Resource(name)
	if !ok {
		return sfq.UnknownResource(name)
	}
	reserved := "none"
	if r.Reserved != 0 {
		reserved = strconv.FormatUint(uint64(r.Reserved), 10)
	}
	var own []string
	for _, l := range r.Limits {
		own = append(own, fmt.Sprintf("%s=%d/%d", l.Tenant, rn.t.ResourceHeld(name, l.Tenant), l.Max))
	}
	if rn.opt.JSON {
		rn.emitJSON(map[string]any{"resource": name, "capacity": r.Capacity, "tenant_max": sfq.FormatTenantMax(r.TenantMax), "held": r.Held,
			"users": r.Users, "queued": r.Queued, "reserved": reserved, "tenants": own})
		return nil
	}
	line := fmt.Sprintf("resource %s capacity=%d tenant_max=%s held=%d users=%d queued=%d reserved=%s", name, r.Capacity,
		sfq.FormatTenantMax(r.TenantMax), r.Held, r.Users, r.Queued, reserved)
	if len(own) > 0 {
		line += " tenants=" + strings.Join(own, ",")
	}
	fmt.Fprintln(rn.out, line)
	return nil
}

// needResources refuses resources below feature level 8, as the state
// machine does.
func (c *Core) needResources(what string) error {
	if c.level < kindsLevel {
		return fmt.Errorf("%s needs feature level %d", what, kindsLevel)
	}
	return nil
}

// SetResource implements Target.
func (c *Core) SetResource(now sfq.Time, spec sfq.ResourceSpec) error {
	if err := c.needResources("resource"); err != nil {
		return err
	}
	_, err := c.S.SetResource(now, spec)
	return err
}

// SetResourceLimit implements Target.
func (c *Core) SetResourceLimit(now sfq.Time, name, tenant string, max uint32) error {
	if err := c.needResources("resource"); err != nil {
		return err
	}
	_, err := c.S.SetResourceLimit(now, name, tenant, max)
	return err
}

// DeleteResource implements Target.
func (c *Core) DeleteResource(now sfq.Time, name string) error {
	if err := c.needResources("resource delete"); err != nil {
		return err
	}
	c.S.SetClock(now)
	return c.S.DeleteResource(name)
}

// Resource implements Target.
func (c *Core) Resource(name string) (sfq.ResourceInfo, bool) { return c.S.Resource(name) }

// ResourceHeld implements Target.
func (c *Core) ResourceHeld(name, tenant string) uint32 { return resourceHeld(c.S, name, tenant) }

func resourceHeld(s *sfq.Scheduler, name, tenant string) uint32 {
	o, ok := s.TenantIndex(tenant)
	if !ok {
		return 0
	}
	held, _, _ := s.TenantHeld(o, name)
	return held
}

// SetResource implements Target: a ResourceSet.
func (m *Machine) SetResource(now sfq.Time, spec sfq.ResourceSpec) error {
	c := &clusterpb.ResourceSet{Name: spec.Name, Capacity: &spec.Capacity}
	if spec.TenantMax != sfq.NoTenantMax {
		c.TenantMax = &spec.TenantMax
	}
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: c}})
	return err
}

// SetResourceLimit implements Target: a ResourceSet of a tenant's own
// limit.
func (m *Machine) SetResourceLimit(now sfq.Time, name, tenant string, max uint32) error {
	c := &clusterpb.ResourceSet{Name: name, Tenant: tenant}
	if max != sfq.NoTenantMax {
		c.Max = &max
	}
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_ResourceSet{ResourceSet: c}})
	return err
}

// DeleteResource implements Target: a ResourceDelete.
func (m *Machine) DeleteResource(now sfq.Time, name string) error {
	_, err := m.apply(now, &clusterpb.Command{Cmd: &clusterpb.Command_ResourceDelete{ResourceDelete: &clusterpb.ResourceDelete{Name: name}}})
	return err
}

// Resource implements Target.
func (m *Machine) Resource(name string) (r sfq.ResourceInfo, ok bool) {
	m.F.Read(func(s *sfq.Scheduler) { r, ok = s.Resource(name) })
	return r, ok
}

// ResourceHeld implements Target.
func (m *Machine) ResourceHeld(name, tenant string) (held uint32) {
	m.F.Read(func(s *sfq.Scheduler) { held = resourceHeld(s, name, tenant) })
	return held
}
