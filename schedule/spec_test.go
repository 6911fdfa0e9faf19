package schedule

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baristahq/barista/sfq"
)

// slotsIn lists n slots of spec in zone after the local time start,
// each as RFC 3339 in the zone.
func slotsIn(t *testing.T, spec, zone, start string, n int) []string {
	t.Helper()
	s, err := Parse(spec, zone)
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := LoadZone(zone)
	from, err := time.ParseInLocation("2006-01-02T15:04", start, loc)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ms := range s.Slots(from.UnixMilli(), n) {
		out = append(out, time.UnixMilli(ms).In(loc).Format(time.RFC3339))
	}
	return out
}

// TestDaylightSavingRule: a time of day fires once a day, every day — at
// the first instant after the gap when the clock skips it, at its first
// occurrence when the clock shows it twice — while "*" in the hour field
// fires every hour of real time.
func TestDaylightSavingRule(t *testing.T) {
	for _, c := range []struct {
		spec, zone, start string
		want              []string
	}{
		// Europe/Berlin: 02:00 CET -> 03:00 CEST on 2026-03-29; 03:00 CEST
		// -> 02:00 CET on 2026-10-25 (02:00-03:00 shown twice).
		{"30 2 * * *", "Europe/Berlin", "2026-03-28T00:00", []string{"2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"30 2 * * *", "Europe/Berlin", "2026-10-24T00:00", []string{"2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"0 * * * *", "Europe/Berlin", "2026-03-29T00:30", []string{"2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
		{"0 * * * *", "Europe/Berlin", "2026-10-25T00:30", []string{"2026-10-25T01:00:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"}},
		{"*/30 2 * * *", "Europe/Berlin", "2026-03-29T00:00", []string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"*/30 2 * * *", "Europe/Berlin", "2026-10-25T00:00", []string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:00:00+01:00"}},
		// A time the clock does not skip is untouched on that day.
		{"0 3 * * *", "Europe/Berlin", "2026-03-28T12:00", []string{"2026-03-29T03:00:00+02:00", "2026-03-30T03:00:00+02:00"}},
		// America/New_York: 02:00 EST -> 03:00 EDT on 2026-03-08; 02:00 EDT
		// -> 01:00 EST on 2026-11-01 (01:00-02:00 shown twice).
		{"30 2 * * *", "America/New_York", "2026-03-07T12:00", []string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"30 1 * * *", "America/New_York", "2026-10-31T12:00", []string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"30 2 * * *", "America/New_York", "2026-10-31T12:00", []string{"2026-11-01T02:30:00-05:00", "2026-11-02T02:30:00-05:00"}},
		// Macros and other fields, in UTC (the default zone).
		{"@daily", "", "2026-01-01T10:00", []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}},
		{"@hourly", "UTC", "2026-01-01T10:00", []string{"2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"}},
		{"0 9 * * MON-FRI", "", "2026-01-02T10:00", []string{"2026-01-05T09:00:00Z", "2026-01-06T09:00:00Z"}},
		{"0 0 29 2 *", "", "2026-01-01T00:00", []string{"2028-02-29T00:00:00Z"}},
	} {
		if got := slotsIn(t, c.spec, c.zone, c.start, len(c.want)); !slices.Equal(got, c.want) {
			t.Errorf("%q in %q after %s:\n got %v\nwant %v", c.spec, c.zone, c.start, got, c.want)
		}
	}
}

// TestEvery: the slots of @every D are the multiples of D since the Unix
// epoch, whatever the zone.
func TestEvery(t *testing.T) {
	s, err := Parse("@every 90s", "Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]int64{{0, 90_000}, {89_999, 90_000}, {90_000, 180_000}, {1_700_000_000_123, 1_700_000_010_000}} {
		if got := s.Next(c[0]); got != c[1] {
			t.Errorf("Next(%d) = %d, want %d", c[0], got, c[1])
		}
	}
	if got := s.Slots(0, 3); !slices.Equal(got, []int64{90_000, 180_000, 270_000}) {
		t.Errorf("slots %v", got)
	}
	if s.Every() != 90*time.Second {
		t.Errorf("every %s", s.Every())
	}
}

// TestParseRefusals: what Parse refuses, and why it says.
func TestParseRefusals(t *testing.T) {
	for _, c := range []struct{ spec, zone, msg string }{
		{"@every 500ms", "", "the period is 500ms (want 1s .. 8760h0m0s)"},
		{"@every 1.0000001s", "", "is not whole milliseconds"},
		{"@every soon", "", `time: invalid duration "soon"`},
		{"TZ=UTC 0 3 * * *", "", "give the time zone as the schedule's zone"},
		{"61 * * * *", "", "above maximum"},
		{"* * * *", "", "expected exactly 5 fields"},
		{"0 0 30 2 *", "", "never fires"},
		{"@sometimes", "", "unrecognized descriptor"},
		{"0 3 * * *", "Mars/Olympus_Mons", `zone "Mars/Olympus_Mons" is not an IANA time zone name`},
		{"0 3 * * *", "Local", `zone "Local" is not an IANA time zone name`},
		{"0 3 * * *", "../etc/passwd", "zone: "},
		{"", "", "spec: 0 bytes"},
	} {
		_, err := Parse(c.spec, c.zone)
		if r := sfq.RefusalOf(err); err == nil || r.Code != sfq.CodeInvalid || !strings.Contains(r.Line(), c.msg) {
			t.Errorf("Parse(%q, %q) = %v, want one saying %q", c.spec, c.zone, err, c.msg)
		}
	}
}

// TestEmbeddedZones: the zones come from the embedded database, not the
// host's: every zone of it loads, and UTC is UTC.
func TestEmbeddedZones(t *testing.T) {
	if loc, err := LoadZone(""); err != nil || loc != time.UTC {
		t.Fatalf("the default zone: %v %v", loc, err)
	}
	if loc, err := LoadZone("Europe/Berlin"); err != nil || loc.String() != "Europe/Berlin" {
		t.Fatalf("Europe/Berlin: %v %v", loc, err)
	}
	n := 0
	for name := range zones.files {
		if _, err := LoadZone(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		n++
	}
	if n < 500 {
		t.Fatalf("the embedded database holds %d zones", n)
	}
}
