package main

import (
	"errors"
	"flag"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/sfq"
)

// value is the typed, bounded destination of a flag, of a configuration
// file key, or of a field of a JSON-lines submit. Set reads text (a flag,
// a "config set" KEY=VALUE, a JSON string); setTOML reads a decoded TOML
// value. Both refuse a malformed or out-of-range value with the same
// message, which shows the value and what is allowed but not the name:
// the caller puts the flag, key or field in front.
type value interface {
	flag.Value
	setTOML(v any) error
	// allowed describes the accepted values ("1..1000"), or "".
	allowed() string
}

// integer is what intVal stores.
type integer interface {
	~int | ~int64 | ~uint | ~uint16 | ~uint32 | ~uint64
}

// intVal is a whole number in [lo, hi]. Text is parsed without a size
// limit, so a number too large for the field is out of range, never
// wrapped.
func (*intVal[T]) isInteger()  {}
func (*durVal[T]) isDuration() {}

type intVal[T integer] struct {
	p      *T
	lo, hi T
}

func (v *intVal[T]) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return fmt.Sprint(*v.p)
}

// number is the value itself, for JSON.
func (v *intVal[T]) number() any { return *v.p }

func (v *intVal[T]) allowed() string { return fmt.Sprintf("%d..%d", v.lo, v.hi) }

func (v *intVal[T]) Set(s string) error {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return fmt.Errorf("%q is not a whole number", s)
	}
	return v.set(n)
}

func (v *intVal[T]) setTOML(x any) error {
	i, ok := x.(int64)
	if !ok {
		return wrongType("a whole number", x)
	}
	return v.set(big.NewInt(i))
}

func (v *intVal[T]) set(n *big.Int) error {
	if n.Cmp(bigOf(v.lo)) < 0 || n.Cmp(bigOf(v.hi)) > 0 {
		return fmt.Errorf("%s is out of range (%s)", n, v.allowed())
	}
	if n.Sign() < 0 {
		*v.p = T(n.Int64())
	} else {
		*v.p = T(n.Uint64())
	}
	return nil
}

func bigOf[T integer](x T) *big.Int {
	if x < 0 {
		return big.NewInt(int64(x))
	}
	return new(big.Int).SetUint64(uint64(x))
}

// durVal is a duration in [lo, hi] stored as a whole number of units
// (time.Nanosecond for a time.Duration, time.Millisecond for the
// millisecond fields of jobs and the replicated configuration). A value
// must be a whole number of step (at least unit): one that is not a whole
// number of milliseconds, where milliseconds are kept, is refused, never
// rounded. If zero is set, 0 is also allowed and means zero ("none").
type durVal[T ~int64] struct {
	p          *T
	unit, step time.Duration
	lo, hi     time.Duration
	zero       string
}

// durationVal is a time.Duration in [lo, hi].
func durationVal(p *time.Duration, lo, hi time.Duration) *durVal[time.Duration] {
	return &durVal[time.Duration]{p: p, unit: time.Nanosecond, step: time.Nanosecond, lo: lo, hi: hi}
}

// msVal is a duration in [lo, hi] kept in whole milliseconds.
func msVal(p *int64, lo, hi time.Duration) *durVal[int64] {
	return &durVal[int64]{p: p, unit: time.Millisecond, step: time.Millisecond, lo: lo, hi: hi}
}

// orZero also allows 0, meaning what says.
func (v *durVal[T]) orZero(says string) *durVal[T] { v.zero = says; return v }

// wholeMs refuses a value that is not a whole number of milliseconds.
func (v *durVal[T]) wholeMs() *durVal[T] { v.step = max(v.step, time.Millisecond); return v }

func (v *durVal[T]) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return fmtDuration(time.Duration(*v.p) * v.unit)
}

func (v *durVal[T]) allowed() string {
	r := fmtDuration(v.lo) + ".." + fmtDuration(v.hi)
	if v.step == time.Millisecond {
		r += " in whole milliseconds"
	}
	if v.zero != "" {
		return "0 for " + v.zero + ", or " + r
	}
	return r
}

func (v *durVal[T]) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (like 500ms or 24h)", s)
	}
	switch {
	case d == 0 && v.zero != "":
	case d < v.lo || d > v.hi:
		return fmt.Errorf("%s is out of range (%s)", s, v.allowed())
	case d%v.step != 0:
		return fmt.Errorf("%s is not a whole number of %s", s, unitName(v.step))
	}
	*v.p = T(d / v.unit)
	return nil
}

func (v *durVal[T]) setTOML(x any) error {
	s, ok := x.(string)
	if !ok {
		return wrongType("a duration string like \"500ms\"", x)
	}
	return v.Set(s)
}

func unitName(u time.Duration) string {
	if u == time.Millisecond {
		return "milliseconds"
	}
	return fmtDuration(u)
}

// fmtDuration prints d in its largest exact unit ("90s", "8760h", "250ms"),
// a form time.ParseDuration reads back.
func fmtDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// stringVal is any string.
type stringVal struct{ p *string }

func (v *stringVal) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return *v.p
}
func (v *stringVal) allowed() string    { return "" }
func (v *stringVal) Set(s string) error { *v.p = s; return nil }
func (v *stringVal) setTOML(x any) error {
	s, ok := x.(string)
	if !ok {
		return wrongType("a string", x)
	}
	*v.p = s
	return nil
}

// boolVal is true or false; as a flag it needs no argument.
type boolVal struct{ p *bool }

func (v *boolVal) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return strconv.FormatBool(*v.p)
}
func (v *boolVal) IsBoolFlag() bool { return true }
func (v *boolVal) allowed() string  { return "" }
func (v *boolVal) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%q is not true or false", s)
	}
	*v.p = b
	return nil
}
func (v *boolVal) setTOML(x any) error {
	b, ok := x.(bool)
	if !ok {
		return wrongType("true or false", x)
	}
	*v.p = b
	return nil
}

// onOffVal is on or off (as a flag it needs its argument).
func onOffVal(p *bool) value {
	return &parsedVal[bool]{p: p, want: "", format: onOff,
		parse: func(s string) (bool, error) {
			switch strings.ToLower(s) {
			case "on":
				return true, nil
			case "off":
				return false, nil
			}
			return false, fmt.Errorf("%q is not on or off", s)
		}}
}

// listVal is a list of strings: comma-separated as text, an array of
// strings in TOML.
type listVal struct{ p *[]string }

func (v *listVal) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}
func (v *listVal) allowed() string { return "" }
func (v *listVal) Set(s string) error {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	*v.p = out
	return nil
}
func (v *listVal) setTOML(x any) error {
	arr, ok := x.([]any)
	if !ok {
		return wrongType("an array of strings", x)
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			return &subkeyError{sub: fmt.Sprintf("[%d]", i), err: wrongType("a string", e)}
		}
		out = append(out, s)
	}
	*v.p = out
	return nil
}

// parsedVal is a value read by a parser (a log level, a steal policy).
type parsedVal[T any] struct {
	p      *T
	parse  func(string) (T, error)
	format func(T) string
	want   string
}

func (v *parsedVal[T]) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return v.format(*v.p)
}
func (v *parsedVal[T]) allowed() string { return v.want }
func (v *parsedVal[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return err
	}
	*v.p = x
	return nil
}
func (v *parsedVal[T]) setTOML(x any) error {
	s, ok := x.(string)
	if !ok {
		return wrongType("a string", x)
	}
	return v.Set(s)
}

// wrongType is the refusal of a TOML value of the wrong type.
func wrongType(want string, got any) error {
	kind := "a value of another type"
	switch got.(type) {
	case string:
		kind = "a string"
	case int64:
		kind = "an integer"
	case float64:
		kind = "a float"
	case bool:
		kind = "a boolean"
	case []any:
		kind = "an array"
	case []map[string]any:
		kind = "an array of tables"
	case map[string]any:
		kind = "a table"
	case time.Time:
		kind = "a date-time"
	}
	return fmt.Errorf("want %s, got %s", want, kind)
}

// subkeyError is a refusal inside a value (an element of an array, a key
// of a table in an array): sub ("[2].role") follows the value's name.
type subkeyError struct {
	sub string
	err error
}

func (e *subkeyError) Error() string { return e.sub + ": " + e.err.Error() }
func (e *subkeyError) Unwrap() error { return e.err }

// named puts a flag or key name in front of a value's refusal:
// "--cap: 4294967297 is out of range (0..4294967295)".
func named(name string, err error) error {
	var se *subkeyError
	if errors.As(err, &se) {
		return fmt.Errorf("%s%s: %w", name, se.sub, se.err)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// numFlag defines a whole-number flag in [lo, hi] with default def.
func numFlag[T integer](fs *flag.FlagSet, p *T, name string, def, lo, hi T, usage string) {
	*p = def
	defineFlag(fs, name, usage, &intVal[T]{p: p, lo: lo, hi: hi})
}

// durFlag defines a duration flag in [lo, hi] with default def; says, if
// not "", also allows 0 with that meaning.
func durFlag(fs *flag.FlagSet, p *time.Duration, name string, def, lo, hi time.Duration, says, usage string) {
	*p = def
	defineFlag(fs, name, usage, durationVal(p, lo, hi).orZero(says))
}

// msFlag is durFlag for a duration sent in whole milliseconds.
func msFlag(fs *flag.FlagSet, p *time.Duration, name string, def, lo, hi time.Duration, says, usage string) {
	*p = def
	defineFlag(fs, name, usage, durationVal(p, lo, hi).orZero(says).wholeMs())
}

// defineFlag defines a flag of a value, its range appended to the help.
func defineFlag(fs *flag.FlagSet, name, usage string, v value) {
	if a := v.allowed(); a != "" {
		usage += " (" + a + ")"
	}
	fs.Var(v, name, usage)
}

// rateVal is the N/PERIOD of a rate limit ("none" or "off" for none); its
// burst is a setting of its own, kept.
type rateVal struct{ p *sfq.RateLimit }

func (v *rateVal) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	if v.p.N == 0 {
		return "off"
	}
	return v.p.PerPeriod()
}
func (v *rateVal) allowed() string { return "off or N/PERIOD" }
func (v *rateVal) Set(s string) error {
	r, err := sfq.ParseRate(s, 0)
	if err != nil {
		return err
	}
	if r.N == 0 {
		*v.p = sfq.RateLimit{} // off: no burst either
		return nil
	}
	v.p.N, v.p.PeriodMs = r.N, r.PeriodMs
	return nil
}
func (v *rateVal) setTOML(x any) error {
	s, ok := x.(string)
	if !ok {
		return wrongType("a string", x)
	}
	return v.Set(s)
}

// implicitTenantsVal is implicit_tenants: off, or the tier unknown
// tenants are made with.
type implicitTenantsVal struct{ p *fsm.PoolSettings }

func (v *implicitTenantsVal) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return v.p.ImplicitString()
}
func (v *implicitTenantsVal) allowed() string { return "off, free, bronze, silver, gold or diamond" }
func (v *implicitTenantsVal) Set(s string) error {
	if s == "off" {
		v.p.Implicit, v.p.ImplicitTier = false, 0
		return nil
	}
	t, err := sfq.ParseTier(s)
	if err != nil {
		return fmt.Errorf("%q is not off or a tier (free, bronze, silver, gold or diamond)", s)
	}
	v.p.Implicit, v.p.ImplicitTier = true, t
	return nil
}
func (v *implicitTenantsVal) setTOML(x any) error {
	s, ok := x.(string)
	if !ok {
		return wrongType("a string", x)
	}
	return v.Set(s)
}

// defaultTenantVal is default_tenant: none, or a tenant's name.
func defaultTenantVal(p *string) value {
	return &parsedVal[string]{p: p, want: "none or a tenant name",
		parse: func(s string) (string, error) {
			if s == "none" {
				return "", nil
			}
			if err := sfq.ValidateName("default_tenant", s); err != nil {
				return "", err
			}
			return s, nil
		},
		format: func(s string) string {
			if s == "" {
				return "none"
			}
			return s
		}}
}
