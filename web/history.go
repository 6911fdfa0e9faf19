package web

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baristahq/barista/rpc"
)

// The overview's chart: every node samples the live view of fair shares
// (each tenant's share of the estimated CPU dispatched in the last
// rpc.DefaultTopWindow, and its entitlement: its weight among the tenants
// with queued jobs) every historyEvery, and keeps the samples of the last
// historySpan in memory. Presentation only: nothing here reaches the
// state machine, and a restarted node starts a new history.
const (
	historyEvery = 10 * time.Second
	historySpan  = time.Hour
	// historyTenants bounds the tenants one sample keeps: those with the
	// largest share or entitlement (so at most 360 × 256 small records).
	historyTenants = 256
)

// shareSample is the live view at one moment.
type shareSample struct {
	at time.Time
	// dispatches is the cluster's dispatch count in the window before at.
	dispatches uint64
	window     time.Duration
	tenants    []tenantSample
}

type tenantSample struct {
	name            string
	share, entitled float32
	dispatches      uint32
}

// shareHistory is a node's samples, oldest first.
type shareHistory struct {
	mu      sync.Mutex
	samples []shareSample
}

// add records a sample and forgets those older than historySpan.
func (h *shareHistory) add(s shareSample) {
	if len(s.tenants) > historyTenants {
		slices.SortStableFunc(s.tenants, func(a, b tenantSample) int {
			return cmp.Compare(max(b.share, b.entitled), max(a.share, a.entitled))
		})
		s.tenants = slices.Clip(s.tenants[:historyTenants])
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.samples = append(h.samples, s)
	drop := 0
	for drop < len(h.samples) && s.at.Sub(h.samples[drop].at) > historySpan {
		drop++
	}
	if drop > 0 {
		h.samples = slices.Delete(h.samples, 0, drop)
	}
}

// since returns the samples not older than span before now.
func (h *shareHistory) since(now time.Time, span time.Duration) []shareSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := 0
	for i < len(h.samples) && now.Sub(h.samples[i].at) > span {
		i++
	}
	return slices.Clone(h.samples[i:])
}

// sampleShares samples the live view until stop is closed (the gRPC
// server stops).
func (s *Server) sampleShares(stop <-chan struct{}) {
	t := time.NewTicker(historyEvery)
	defer t.Stop()
	for {
		s.history.add(sampleTop(s.srv, time.Now()))
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// sampleTop takes a sample from this node's state.
func sampleTop(srv *rpc.Server, now time.Time) shareSample {
	top := srv.LocalTop(rpc.DefaultTopWindow)
	out := shareSample{at: now, window: time.Duration(top.WindowMs) * time.Millisecond}
	for _, r := range top.Tenants {
		out.dispatches += r.Dispatches
		if r.Share == 0 && r.EntitledShare == 0 && r.Dispatches == 0 {
			continue
		}
		out.tenants = append(out.tenants, tenantSample{name: r.Name, share: float32(r.Share), entitled: float32(r.EntitledShare),
			dispatches: uint32(min(r.Dispatches, math.MaxUint32))})
	}
	return out
}

// chart is an SVG line chart the server draws (no script): coordinates
// in the SVG's own units, each series a polyline.
type chart struct {
	W, H                    int
	Left, Top, PlotW, PlotH int
	Series                  []chartSeries
	XTicks, YTicks          []chartTick
	// Empty says why nothing is drawn ("" when something is).
	Empty string
	// Title names the chart for a screen reader.
	Title string
}

type chartSeries struct {
	Name, Color string
	// Points is the polyline's "x,y x,y ..."; Dashed draws it dashed
	// (entitlements).
	Points string
	Dashed bool
}

type chartTick struct {
	X, Y  int
	Label string
}

// chartColors tell the tenants apart (the legend repeats them).
var chartColors = []string{"#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"}

// chartMaxTenants bounds the tenants one chart draws (one color each).
const chartMaxTenants = 8

const (
	chartW, chartH, rateH   = 760, 230, 150
	chartLeft, chartTop     = 44, 10
	chartRight, chartBottom = 10, 26
)

// newChart lays out an empty chart h units high over [now-span, now]
// and [0, ymax].
func newChart(title string, h int, now time.Time, span time.Duration, ymax float64, ylabel func(float64) string) chart {
	c := chart{W: chartW, H: h, Left: chartLeft, Top: chartTop, PlotW: chartW - chartLeft - chartRight, PlotH: h - chartTop - chartBottom, Title: title}
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		c.YTicks = append(c.YTicks, chartTick{X: c.Left, Y: c.y(v, ymax), Label: ylabel(v)})
	}
	step := time.Minute
	for _, s := range []time.Duration{2 * time.Minute, 5 * time.Minute, 10 * time.Minute} {
		if span/step > 8 {
			step = s
		}
	}
	for ago := time.Duration(0); ago <= span; ago += step {
		label := "now"
		if ago > 0 {
			label = "-" + strconv.Itoa(int(ago/time.Minute)) + "m"
		}
		c.XTicks = append(c.XTicks, chartTick{X: c.x(now.Add(-ago), now, span), Y: c.Top + c.PlotH, Label: label})
	}
	return c
}

func (c *chart) x(at, now time.Time, span time.Duration) int {
	f := 1 - float64(now.Sub(at))/float64(span)
	return c.Left + int(math.Round(f*float64(c.PlotW)))
}

func (c *chart) y(v, ymax float64) int {
	if ymax <= 0 {
		return c.Top + c.PlotH
	}
	return c.Top + c.PlotH - int(math.Round(min(v, ymax)/ymax*float64(c.PlotH)))
}

// chartSpan is the time a chart covers: the samples' age, from two
// minutes up to historySpan.
func chartSpan(samples []shareSample, now time.Time) time.Duration {
	span := 2 * time.Minute
	if len(samples) > 0 {
		span = max(span, now.Sub(samples[0].at).Round(time.Minute)+time.Minute)
	}
	return min(span, historySpan)
}

// shareChart draws each named tenant's share (solid) and entitlement
// (dashed) over the samples, in the colors of their order.
func shareChart(samples []shareSample, tenants []string, now time.Time) chart {
	span := chartSpan(samples, now)
	c := newChart("share and entitlement per tenant over the last "+spanText(span), chartH, now, span, 1, func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) })
	if len(samples) < 2 || len(tenants) == 0 {
		c.Empty = "not enough samples yet: this node samples the shares every " + historyEvery.String()
		return c
	}
	for i, name := range tenants {
		var share, ent strings.Builder
		for _, s := range samples {
			var v tenantSample
			for _, t := range s.tenants {
				if t.name == name {
					v = t
					break
				}
			}
			x := c.x(s.at, now, span)
			fmt.Fprintf(&share, "%d,%d ", x, c.y(float64(v.share), 1))
			fmt.Fprintf(&ent, "%d,%d ", x, c.y(float64(v.entitled), 1))
		}
		color := chartColors[i%len(chartColors)]
		c.Series = append(c.Series, chartSeries{Name: name + " entitled", Color: color, Points: strings.TrimSpace(ent.String()), Dashed: true},
			chartSeries{Name: name, Color: color, Points: strings.TrimSpace(share.String())})
	}
	return c
}

// rateChart draws the dispatches per second over the samples: of every
// tenant, or only of tenant if it is set.
func rateChart(samples []shareSample, tenant string, now time.Time) chart {
	span := chartSpan(samples, now)
	rates := make([]float64, len(samples))
	top := 0.0
	for i, s := range samples {
		n := s.dispatches
		if tenant != "" {
			n = 0
			for _, t := range s.tenants {
				if t.name == tenant {
					n = uint64(t.dispatches)
				}
			}
		}
		if s.window > 0 {
			rates[i] = float64(n) / s.window.Seconds()
		}
		top = max(top, rates[i])
	}
	ymax := niceCeil(top)
	c := newChart("dispatches per second over the last "+spanText(span), rateH, now, span, ymax, func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) })
	if len(samples) < 2 {
		c.Empty = "not enough samples yet: this node samples every " + historyEvery.String()
		return c
	}
	var b strings.Builder
	for i, s := range samples {
		fmt.Fprintf(&b, "%d,%d ", c.x(s.at, now, span), c.y(rates[i], ymax))
	}
	c.Series = []chartSeries{{Name: "dispatches/s", Color: chartColors[0], Points: strings.TrimSpace(b.String())}}
	return c
}

// spanText says a chart's span in minutes ("60 minutes").
func spanText(span time.Duration) string { return strconv.Itoa(int(span/time.Minute)) + " minutes" }

// niceCeil rounds up to 1, 2 or 5 times a power of ten (1 at least).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// chartTenants picks the tenants an admin's chart draws: those with the
// largest share plus entitlement summed over the samples, at most
// chartMaxTenants, in the order of order (the live view's).
func chartTenants(samples []shareSample, order []string) []string {
	weight := map[string]float64{}
	for _, s := range samples {
		for _, t := range s.tenants {
			weight[t.name] += float64(t.share + t.entitled)
		}
	}
	var names []string
	for _, n := range order {
		if weight[n] > 0 {
			names = append(names, n)
		}
	}
	if len(names) > chartMaxTenants {
		ranked := slices.Clone(names)
		slices.SortStableFunc(ranked, func(a, b string) int { return cmp.Compare(weight[b], weight[a]) })
		keep := map[string]bool{}
		for _, n := range ranked[:chartMaxTenants] {
			keep[n] = true
		}
		names = slices.DeleteFunc(names, func(n string) bool { return !keep[n] })
	}
	return names
}
