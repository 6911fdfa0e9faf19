package web

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/baristahq/barista/internal/text"
	"math"
	"strconv"
	"strings"
	"unicode"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The HTTP/JSON API reads a request body field by field against its
// message before protojson decodes it, so that what it refuses is said in
// one sentence naming the field as the .proto does (est_cost_ms, not
// protojson's estCostMs), what was given and what is allowed. It takes an
// enum by its name in any case ("MD" or "md"), and by the short name the
// CLI uses ("fair" for GROUP_FAIR, "inherit" for GROUP_CAP_INHERIT; "-"
// for "_" too: "prefer-fit"), as it takes a job state's ("QUEUED" or
// "queued"). A body it changes nothing of is decoded as it came, so the
// positions protojson's errors name (a syntax error) are the caller's
// own. NewDecoder (gateway.go) and Unmarshal do it.

// Unmarshal decodes data into v, read as the API reads a body.
func (m *apiMarshaler) Unmarshal(data []byte, v any) error {
	if msg, ok := v.(proto.Message); ok {
		var err error
		if data, err = normalizeBody(data, msg.ProtoReflect().Descriptor()); err != nil {
			return err
		}
	}
	return m.JSONPb.Unmarshal(data, v)
}

// normalizeBody checks a JSON body against message md and returns it with
// every enum named by its exact name (data itself when nothing changed,
// or when it is no JSON object: protojson then says what is wrong).
func normalizeBody(data []byte, md protoreflect.MessageDescriptor) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return data, nil
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return data, nil
	}
	changed, err := normalizeMessage(obj, md, "")
	if err != nil || !changed {
		return data, err
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return data, nil
	}
	return out, nil
}

// normalizeMessage checks the fields of one JSON object of message md
// (at path prefix, "" or "caps."), rewriting enum names in place; it
// reports whether it changed any.
func normalizeMessage(obj map[string]any, md protoreflect.MessageDescriptor, prefix string) (bool, error) {
	changed := false
	fields := md.Fields()
	for k, val := range obj {
		fd := fields.ByName(protoreflect.Name(k))
		if fd == nil {
			fd = fields.ByJSONName(k)
		}
		if fd == nil {
			return false, text.Invalidf(prefix+k, "not a field of this request (it takes %s)", fieldList(md))
		}
		name := prefix + string(fd.Name())
		if val == nil {
			continue // null: the field's default, as protojson reads it
		}
		if fd.IsList() {
			list, ok := val.([]any)
			if !ok {
				return false, text.Invalidf(name, "%s is not a list", shown(val))
			}
			for i := range list {
				c, err := normalizeValue(fd, &list[i], fmt.Sprintf("%s[%d]", name, i))
				if err != nil {
					return false, err
				}
				changed = changed || c
			}
			continue
		}
		if fd.IsMap() {
			continue // no request has one; protojson reads it
		}
		c, err := normalizeValue(fd, &val, name)
		if err != nil {
			return false, err
		}
		if c {
			obj[k] = val
			changed = true
		}
	}
	return changed, nil
}

// normalizeValue checks one value of field fd (named name in messages).
func normalizeValue(fd protoreflect.FieldDescriptor, v *any, name string) (bool, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		obj, ok := (*v).(map[string]any)
		if !ok {
			return false, text.Invalidf(name, "%s is not an object (it takes %s)", shown(*v), fieldList(fd.Message()))
		}
		return normalizeMessage(obj, fd.Message(), name+".")
	case protoreflect.EnumKind:
		s, ok := (*v).(string)
		if !ok {
			if n, isNum := (*v).(json.Number); isNum {
				if i, err := strconv.ParseInt(string(n), 10, 32); err == nil && fd.Enum().Values().ByNumber(protoreflect.EnumNumber(i)) != nil {
					return false, nil // its number, as protojson takes it
				}
			}
			return false, enumError(fd.Enum(), name, *v)
		}
		exact, ok := enumName(fd.Enum(), s)
		if !ok {
			return false, enumError(fd.Enum(), name, *v)
		}
		*v = exact
		return exact != s, nil
	case protoreflect.BoolKind:
		if _, ok := (*v).(bool); !ok {
			return false, text.Invalidf(name, "%s is not true or false", shown(*v))
		}
	case protoreflect.StringKind:
		if _, ok := (*v).(string); !ok {
			return false, text.Invalidf(name, "%s is not a string", shown(*v))
		}
	case protoreflect.BytesKind:
		s, ok := (*v).(string)
		if !ok || !isBase64(s) {
			return false, text.Invalidf(name, "%s is not base64 (a bytes field takes its bytes in base64 in JSON)", shown(*v))
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return false, checkInt(*v, name, math.MinInt32, math.MaxInt32)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return false, checkInt(*v, name, math.MinInt64, math.MaxInt64)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return false, checkUint(*v, name, math.MaxUint32)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return false, checkUint(*v, name, math.MaxUint64)
	}
	return false, nil
}

// intText is the text of a JSON integer: a number, or a string holding
// one (protojson takes both).
func intText(v any) (string, bool) {
	switch x := v.(type) {
	case json.Number:
		return string(x), true
	case string:
		return x, true
	}
	return "", false
}

func checkInt(v any, name string, lo, hi int64) error {
	s, ok := intText(v)
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case !ok || (err != nil && !isRangeErr(err)):
		return text.Invalidf(name, "%s is not a whole number", shown(v))
	case err != nil || n < lo || n > hi:
		return text.Invalidf(name, "%s is out of range (%d to %d)", shown(v), lo, hi)
	}
	return nil
}

func checkUint(v any, name string, hi uint64) error {
	s, ok := intText(v)
	if ok && strings.HasPrefix(s, "-") {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil || isRangeErr(err) {
			return text.Invalidf(name, "%s is out of range (0 to %d)", shown(v), hi)
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	switch {
	case !ok || (err != nil && !isRangeErr(err)):
		return text.Invalidf(name, "%s is not a whole number", shown(v))
	case err != nil || n > hi:
		return text.Invalidf(name, "%s is out of range (0 to %d)", shown(v), hi)
	}
	return nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// isBase64 reports whether s is base64 as protojson takes it: standard or
// URL alphabet, padded or not.
func isBase64(s string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if _, err := enc.DecodeString(s); err == nil {
			return true
		}
	}
	return false
}

// shown renders a given value in a message: JSON, cut at 40 bytes.
func shown(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "the value"
	}
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}

// fieldList names a message's fields, for the refusal of another.
func fieldList(md protoreflect.MessageDescriptor) string {
	var names []string
	for i := range md.Fields().Len() {
		names = append(names, string(md.Fields().Get(i).Name()))
	}
	return strings.Join(names, ", ")
}

// enumPrefix is the prefix that every value of ed but the unspecified one
// shares, in whole words ("GROUP_" of GROUP_FIFO and GROUP_FAIR): the
// short name of a value is its name without it, in lower case.
func enumPrefix(ed protoreflect.EnumDescriptor) string {
	var prefix []string
	first := true
	vals := ed.Values()
	for i := range vals.Len() {
		n := string(vals.Get(i).Name())
		if vals.Get(i).Number() == 0 && strings.HasSuffix(n, "_UNSPECIFIED") {
			continue
		}
		words := strings.Split(n, "_")
		words = words[:len(words)-1] // the last word is the value's own
		if first {
			prefix, first = words, false
			continue
		}
		k := 0
		for k < len(prefix) && k < len(words) && prefix[k] == words[k] {
			k++
		}
		prefix = prefix[:k]
	}
	if len(prefix) == 0 {
		return ""
	}
	return strings.Join(prefix, "_") + "_"
}

// shortNames lists the short names of ed's values (the unspecified one
// left out).
func shortNames(ed protoreflect.EnumDescriptor) []string {
	prefix := enumPrefix(ed)
	var out []string
	vals := ed.Values()
	for i := range vals.Len() {
		n := string(vals.Get(i).Name())
		if vals.Get(i).Number() == 0 && strings.HasSuffix(n, "_UNSPECIFIED") {
			continue
		}
		out = append(out, strings.ToLower(strings.TrimPrefix(n, prefix)))
	}
	return out
}

// enumName finds the value of enum ed named s: its name or its short name
// (enumPrefix), in any case, with "-" for "_".
func enumName(ed protoreflect.EnumDescriptor, s string) (string, bool) {
	vals := ed.Values()
	if vals.ByName(protoreflect.Name(s)) != nil {
		return s, true
	}
	want := strings.ReplaceAll(s, "-", "_")
	prefix := enumPrefix(ed)
	for i := range vals.Len() {
		n := string(vals.Get(i).Name())
		if strings.EqualFold(n, want) || (prefix != "" && strings.EqualFold(n, prefix+want)) {
			return n, true
		}
	}
	return "", false
}

// enumError refuses a value of enum ed that names none of its values.
func enumError(ed protoreflect.EnumDescriptor, name string, v any) error {
	names := shortNames(ed)
	want := strings.Join(names, ", ")
	if len(names) > 1 {
		want = strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	}
	return text.Invalidf(name, "%s is not a %s (want %s)", shown(v), enumNoun(ed), want)
}

// enumNoun names what an enum's values are: GroupOrder is "group order".
func enumNoun(ed protoreflect.EnumDescriptor) string {
	var b strings.Builder
	for i, r := range string(ed.Name()) {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
