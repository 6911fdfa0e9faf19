// Package pbcodec encodes and decodes barista's protobuf messages with the
// reflection-free code generated beside them (proto/*_vtproto.pb.go), and
// gives exactly the answers of google.golang.org/protobuf's own codec:
//
//   - Marshal writes the bytes proto.MarshalOptions{Deterministic: true}
//     writes (fields in number order; barista's messages have no maps),
//     and refuses a proto3 string that is not valid UTF-8, as it does.
//     The one difference is the worker stream's WorkerMessage and
//     LeaderMessage, whose slot is numbered after their oneof: protobuf
//     writes a oneof after the plain fields, the generated code in number
//     order — the same fields and length, decoded alike. No replicated
//     command is laid out so (a test says which messages are).
//   - Unmarshal accepts exactly what proto.Unmarshal accepts and yields an
//     equal message. The generated decoder does not check UTF-8, so the
//     string fields are checked on the wire afterwards; where the
//     generated decoder refuses input (a known field with another wire
//     type, which protobuf keeps as an unknown field), the message is
//     decoded again by protobuf itself, so that answer is protobuf's.
//
// Messages without generated code go to protobuf unchanged. The Raft log
// (fsm.Encode and fsm.Decode) and every gRPC call (Codec) use it.
package pbcodec

import (
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

type vtMarshaler interface {
	SizeVT() int
	MarshalToSizedBufferVTStrict([]byte) (int, error)
}

type vtUnmarshaler interface {
	UnmarshalVT([]byte) error
}

// ErrInvalidUTF8 is returned for a proto3 string field whose bytes are not
// valid UTF-8.
var ErrInvalidUTF8 = errors.New("string field contains invalid UTF-8")

var deterministic = proto.MarshalOptions{Deterministic: true}

// Marshal encodes m as proto.MarshalOptions{Deterministic: true} would.
func Marshal(m proto.Message) ([]byte, error) {
	return AppendMarshal(nil, m)
}

// AppendMarshal appends the encoding of m to b.
func AppendMarshal(b []byte, m proto.Message) ([]byte, error) {
	vt, ok := m.(vtMarshaler)
	if !ok {
		return deterministic.MarshalAppend(b, m)
	}
	return appendSized(b, m, vt, vt.SizeVT())
}

// appendSized appends m, whose encoding takes size bytes.
func appendSized(b []byte, m proto.Message, vt vtMarshaler, size int) ([]byte, error) {
	start := len(b)
	b = grow(b, size)
	if _, err := vt.MarshalToSizedBufferVTStrict(b[start:]); err != nil {
		return nil, err
	}
	if err := check(b[start:], m.ProtoReflect().Descriptor()); err != nil {
		return nil, fmt.Errorf("marshal %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return b, nil
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	out := make([]byte, len(b)+n)
	copy(out, b)
	return out
}

// Unmarshal decodes b into m (reset first), as proto.Unmarshal would.
func Unmarshal(b []byte, m proto.Message) error {
	vt, ok := m.(vtUnmarshaler)
	if !ok {
		return proto.Unmarshal(b, m)
	}
	proto.Reset(m)
	if err := vt.UnmarshalVT(b); err != nil {
		return proto.Unmarshal(b, m)
	}
	if err := check(b, m.ProtoReflect().Descriptor()); err != nil {
		proto.Reset(m)
		return fmt.Errorf("unmarshal %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}

// field says what a field number of a message holds on the wire.
type field struct {
	str  bool           // a proto3 string: its bytes must be UTF-8
	msg  *layout        // a message: its bytes are checked by its own layout
	list bool           // a repeated number, which may come packed:
	one  protowire.Type // the wire type of one of its numbers
}

// layout is a message's string, message and number-list fields by
// number: the ones below denseFields in a slice, the rest in a map.
type layout struct {
	dense  []field
	fields map[protowire.Number]field
}

const denseFields = 512

func (l *layout) set(num protowire.Number, f field) {
	if num < denseFields {
		for int(num) >= len(l.dense) {
			l.dense = append(l.dense, field{})
		}
		l.dense[num] = f
		return
	}
	l.fields[num] = f
}

func (l *layout) get(num protowire.Number) field {
	if num < protowire.Number(len(l.dense)) {
		return l.dense[num]
	}
	return l.fields[num]
}

// scalarWire is the wire type of one number of each kind that can be
// packed.
var scalarWire = map[protoreflect.Kind]protowire.Type{
	protoreflect.BoolKind: protowire.VarintType, protoreflect.EnumKind: protowire.VarintType,
	protoreflect.Int32Kind: protowire.VarintType, protoreflect.Sint32Kind: protowire.VarintType,
	protoreflect.Uint32Kind: protowire.VarintType, protoreflect.Int64Kind: protowire.VarintType,
	protoreflect.Sint64Kind: protowire.VarintType, protoreflect.Uint64Kind: protowire.VarintType,
	protoreflect.Sfixed32Kind: protowire.Fixed32Type, protoreflect.Fixed32Kind: protowire.Fixed32Type,
	protoreflect.FloatKind: protowire.Fixed32Type, protoreflect.Sfixed64Kind: protowire.Fixed64Type,
	protoreflect.Fixed64Kind: protowire.Fixed64Type, protoreflect.DoubleKind: protowire.Fixed64Type,
}

var layouts sync.Map // protoreflect.FullName → *layout

func layoutOf(md protoreflect.MessageDescriptor) *layout {
	if l, ok := layouts.Load(md.FullName()); ok {
		return l.(*layout)
	}
	building := map[protoreflect.FullName]*layout{}
	l := build(md, building)
	for name, b := range building {
		layouts.LoadOrStore(name, b)
	}
	return l
}

// build fills the layouts of md and the messages it holds; building holds
// the ones under way, so a message that contains itself ends.
func build(md protoreflect.MessageDescriptor, building map[protoreflect.FullName]*layout) *layout {
	if l, ok := building[md.FullName()]; ok {
		return l
	}
	l := &layout{fields: map[protowire.Number]field{}}
	building[md.FullName()] = l
	fds := md.Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		switch {
		case fd.IsMap():
			// A map's entries are messages of their own.
			l.set(fd.Number(), field{msg: build(fd.Message(), building)})
		case fd.Kind() == protoreflect.StringKind && fd.Syntax() == protoreflect.Proto3:
			l.set(fd.Number(), field{str: true})
		case fd.Kind() == protoreflect.MessageKind:
			l.set(fd.Number(), field{msg: build(fd.Message(), building)})
		case fd.IsList():
			if t, ok := scalarWire[fd.Kind()]; ok {
				l.set(fd.Number(), field{list: true, one: t})
			}
		}
	}
	return l
}

func check(b []byte, md protoreflect.MessageDescriptor) error {
	return layoutOf(md).check(b)
}

// check walks the wire bytes of one message as protobuf's decoder reads
// them and refuses what it refuses and the generated decoder lets
// through: a known string field that is not UTF-8, and a number (on its
// own or in a packed list) whose varint overflows 64 bits or whose fixed
// width is cut short, and a field number above the largest valid one.
// Unknown fields are stepped over.
func (l *layout) check(b []byte) error {
	for len(b) > 0 {
		var num protowire.Number
		var typ protowire.Type
		if b[0] < 0x80 { // a one-byte tag, the common case
			num, typ = protowire.Number(b[0]>>3), protowire.Type(b[0]&7)
			if num == 0 {
				return errors.New("field number 0")
			}
			b = b[1:]
		} else {
			var n int
			num, typ, n = protowire.ConsumeTag(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if num > protowire.MaxValidNumber {
				return errors.New("field number out of range")
			}
			b = b[n:]
		}
		if typ != protowire.BytesType {
			if typ == protowire.VarintType && len(b) > 0 && b[0] < 0x80 {
				b = b[1:]
				continue
			}
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		var v []byte
		if len(b) > 0 && b[0] < 0x80 && int(b[0]) < len(b) {
			v, b = b[1:1+b[0]], b[1+b[0]:]
		} else {
			var n int
			v, n = protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
		}
		switch f := l.get(num); {
		case f.str:
			if !utf8.Valid(v) {
				return ErrInvalidUTF8
			}
		case f.msg != nil:
			if err := f.msg.check(v); err != nil {
				return err
			}
		case f.list:
			for len(v) > 0 {
				n := protowire.ConsumeFieldValue(num, f.one, v)
				if n < 0 {
					return protowire.ParseError(n)
				}
				v = v[n:]
			}
		}
	}
	return nil
}

// Size is the length of m's encoding, as proto.Size gives it.
func Size(m proto.Message) int {
	if vt, ok := m.(vtMarshaler); ok {
		return vt.SizeVT()
	}
	return proto.Size(m)
}
