package web

import (
	"bytes"
	"encoding/json"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The HTTP/JSON API takes an enum's name in either case ("MD" or "md",
// "GOLD" or "gold"), as it takes a job state's ("QUEUED" or "queued"):
// protojson alone takes only the exact names. A body naming an enum in
// another case is rewritten with the exact names before it is decoded;
// any other body is decoded as it came, so the positions its errors name
// are the caller's own. NewDecoder (gateway.go) and Unmarshal do it.

// Unmarshal decodes data into v, its enum names in either case.
func (m *apiMarshaler) Unmarshal(data []byte, v any) error {
	if msg, ok := v.(proto.Message); ok {
		data = exactEnumNames(data, msg.ProtoReflect().Descriptor())
	}
	return m.JSONPb.Unmarshal(data, v)
}

// exactEnumNames returns data with every enum value of message md named
// in another case replaced by its exact name (data itself when there is
// none, or it is not a JSON object: the decoder then says what is wrong).
func exactEnumNames(data []byte, md protoreflect.MessageDescriptor) []byte {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return data
	}
	if !fixEnums(doc, md) {
		return data
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return data
	}
	return out
}

// fixEnums rewrites, in place, the enum names of message md in a decoded
// JSON value; it reports whether it changed any.
func fixEnums(v any, md protoreflect.MessageDescriptor) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	changed := false
	fields := md.Fields()
	for k, val := range obj {
		fd := fields.ByName(protoreflect.Name(k))
		if fd == nil {
			fd = fields.ByJSONName(k)
		}
		if fd == nil {
			continue // the decoder refuses it, naming it
		}
		each := func(x any, set func(any)) {
			switch {
			case fd.Kind() == protoreflect.EnumKind:
				if s, ok := x.(string); ok {
					if exact, ok := enumName(fd.Enum(), s); ok && exact != s {
						set(exact)
						changed = true
					}
				}
			case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
				if fixEnums(x, fd.Message()) {
					changed = true
				}
			}
		}
		if list, ok := val.([]any); ok && fd.IsList() {
			for i := range list {
				each(list[i], func(n any) { list[i] = n })
			}
			continue
		}
		each(val, func(n any) { obj[k] = n })
	}
	return changed
}

// enumName finds the value of enum ed named s in any case.
func enumName(ed protoreflect.EnumDescriptor, s string) (string, bool) {
	vals := ed.Values()
	if vals.ByName(protoreflect.Name(s)) != nil {
		return s, true
	}
	for i := range vals.Len() {
		if n := string(vals.Get(i).Name()); strings.EqualFold(n, s) {
			return n, true
		}
	}
	return "", false
}
