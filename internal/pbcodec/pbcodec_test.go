package pbcodec

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"pgregory.net/rapid"

	"github.com/baristahq/barista/proto/clusterpb"
)

// messageTypes returns every message type of barista's proto package, by
// name, so the tests cover each of them.
func messageTypes(t testing.TB) []protoreflect.MessageType {
	var out []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if strings.HasPrefix(string(mt.Descriptor().FullName()), "barista.") {
			out = append(out, mt)
		}
		return true
	})
	slices.SortFunc(out, func(a, b protoreflect.MessageType) int {
		return strings.Compare(string(a.Descriptor().FullName()), string(b.Descriptor().FullName()))
	})
	if len(out) < 50 {
		t.Fatalf("only %d barista message types registered", len(out))
	}
	return out
}

// fill sets random values into every field of m (one member of each
// oneof), down to depth levels of messages. badUTF8 is the chance in 1,000
// that a string is not UTF-8.
func fill(r *rand.Rand, m protoreflect.Message, depth, badUTF8 int) {
	fds := m.Descriptor().Fields()
	chosen := map[protoreflect.FullName]protoreflect.FieldDescriptor{}
	oneofs := m.Descriptor().Oneofs()
	for i := range oneofs.Len() {
		o := oneofs.Get(i)
		if r.IntN(4) > 0 {
			chosen[o.FullName()] = o.Fields().Get(r.IntN(o.Fields().Len()))
		}
	}
	for i := range fds.Len() {
		fd := fds.Get(i)
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() && chosen[o.FullName()] != fd {
			continue
		}
		if r.IntN(3) == 0 {
			continue // left unset
		}
		switch {
		case fd.IsMap():
			continue // barista has none; TestNoMaps says so
		case fd.IsList():
			n := r.IntN(4)
			l := m.Mutable(fd).List()
			for range n {
				if fd.Kind() == protoreflect.MessageKind {
					if depth == 0 {
						break
					}
					e := l.NewElement()
					fill(r, e.Message(), depth-1, badUTF8)
					l.Append(e)
				} else {
					l.Append(scalar(r, fd, badUTF8))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth == 0 {
				continue
			}
			fill(r, m.Mutable(fd).Message(), depth-1, badUTF8)
		default:
			m.Set(fd, scalar(r, fd, badUTF8))
		}
	}
}

func scalar(r *rand.Rand, fd protoreflect.FieldDescriptor, badUTF8 int) protoreflect.Value {
	big := func() uint64 {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return r.Uint64N(200)
		case 2:
			return ^uint64(0) - r.Uint64N(3)
		}
		return r.Uint64()
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.IntN(2) == 0)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		if r.IntN(10) == 0 {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(r.Int32N(1000) - 500)) // unknown values too
		}
		return protoreflect.ValueOfEnum(vals.Get(r.IntN(vals.Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(big()))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(big()))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(big()))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(big())
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(r.Float32())
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(r.NormFloat64())
	case protoreflect.StringKind:
		s := []string{"", "t1", "wörker-ü", "日本語", strings.Repeat("x", 200)}[r.IntN(5)]
		if r.IntN(1000) < badUTF8 {
			s += "\xff\xfe"
		}
		return protoreflect.ValueOfString(s)
	case protoreflect.BytesKind:
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return protoreflect.ValueOfBytes(b)
	}
	panic("unhandled kind " + fd.Kind().String())
}

// oneofsLast says whether protobuf's deterministic bytes of a message of
// md (or of one it holds) may differ from the generated code's in order
// alone: a oneof member numbered below a plain field, which protobuf
// writes after the plain fields and the generated code in number order.
func oneofsLast(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	fds := md.Fields()
	lowestOneof, highestPlain := protoreflect.FieldNumber(1<<29), protoreflect.FieldNumber(0)
	for i := range fds.Len() {
		fd := fds.Get(i)
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
			lowestOneof = min(lowestOneof, fd.Number())
		} else {
			highestPlain = max(highestPlain, fd.Number())
		}
		if fd.Kind() == protoreflect.MessageKind && oneofsLast(fd.Message(), seen) {
			return true
		}
	}
	return lowestOneof < highestPlain
}

// TestOnlyTheWorkerStreamOrdersOneofsApart: the worker stream's two
// messages carry their slot after their oneof; every other message —
// the replicated commands above all, whose bytes are the log's — is
// written byte for byte as protobuf writes it.
func TestOnlyTheWorkerStreamOrdersOneofsApart(t *testing.T) {
	var got []string
	for _, mt := range messageTypes(t) {
		if oneofsLast(mt.Descriptor(), map[protoreflect.FullName]bool{}) {
			got = append(got, string(mt.Descriptor().FullName()))
		}
	}
	if want := []string{"barista.v1.LeaderMessage", "barista.v1.WorkerMessage"}; !slices.Equal(got, want) {
		t.Errorf("messages with a oneof before a plain field: %v, want %v", got, want)
	}
}

func TestNoMaps(t *testing.T) {
	// Marshal's bytes equal protobuf's deterministic ones because no
	// message has a map (whose order the two would choose differently).
	for _, mt := range messageTypes(t) {
		fds := mt.Descriptor().Fields()
		for i := range fds.Len() {
			if fds.Get(i).IsMap() {
				t.Errorf("%s has a map field %s", mt.Descriptor().FullName(), fds.Get(i).Name())
			}
		}
		if _, ok := mt.New().Interface().(vtMarshaler); !ok {
			t.Errorf("%s has no generated codec: run make proto", mt.Descriptor().FullName())
		}
	}
}

// drawMessage draws a message type and fills a message of it at random
// (fill), returning the random source for more.
func drawMessage(t *rapid.T, types []protoreflect.MessageType, depth, badUTF8 int) (protoreflect.MessageType, protoreflect.Message, *rand.Rand) {
	mt := types[rapid.IntRange(0, len(types)-1).Draw(t, "type")]
	r := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1))
	m := mt.New()
	fill(r, m, depth, badUTF8)
	return mt, m, r
}

// TestSameAsProtobuf: for random messages of every type, Marshal gives
// protobuf's deterministic bytes (or refuses where it refuses: a string
// that is not UTF-8), and Unmarshal gives back a message equal to
// protobuf's decoding of the same bytes.
func TestSameAsProtobuf(t *testing.T) {
	types := messageTypes(t)
	rapid.Check(t, func(t *rapid.T) {
		mt, m, _ := drawMessage(t, types, 3, rapid.SampledFrom([]int{0, 0, 50}).Draw(t, "badUTF8"))

		want, wantErr := proto.MarshalOptions{Deterministic: true}.Marshal(m.Interface())
		got, err := Marshal(m.Interface())
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%s: Marshal error %v, protobuf's %v", mt.Descriptor().FullName(), err, wantErr)
		}
		if wantErr != nil {
			if !errors.Is(err, ErrInvalidUTF8) {
				t.Fatalf("Marshal refused with %v", err)
			}
			// Encode it without the check, to see the decoders refuse it.
			want, _ = m.Interface().(interface{ MarshalVTStrict() ([]byte, error) }).MarshalVTStrict()
		} else if oneofsLast(mt.Descriptor(), map[protoreflect.FullName]bool{}) {
			// Protobuf writes a oneof after the plain fields; the
			// generated code in number order: the same fields, the same
			// length, decoded alike.
			if len(got) != len(want) {
				t.Fatalf("%s: Marshal wrote %d bytes, protobuf %d", mt.Descriptor().FullName(), len(got), len(want))
			}
			sameDecoding(t, mt, got)
			back := mt.New().Interface()
			if err := proto.Unmarshal(got, back); err != nil || !proto.Equal(back, m.Interface()) {
				t.Fatalf("%s: Marshal\n%x\ndecodes to another message (%v)", mt.Descriptor().FullName(), got, err)
			}
		} else if !bytes.Equal(got, want) {
			t.Fatalf("%s: Marshal\n%x\nprotobuf\n%x", mt.Descriptor().FullName(), got, want)
		}
		sameDecoding(t, mt, want)
	})
}

// TestUnmarshalDamaged: bytes of a real message with damage (a byte
// changed, cut short, bytes inserted) are accepted or refused exactly as
// protobuf accepts or refuses them, with equal results.
func TestUnmarshalDamaged(t *testing.T) {
	types := messageTypes(t)
	rapid.Check(t, func(t *rapid.T) {
		mt, m, r := drawMessage(t, types, 2, 0)
		b, err := Marshal(m.Interface())
		if err != nil {
			t.Fatal(err)
		}
		sameDecoding(t, mt, damage(r, b, rapid.IntRange(1, 4).Draw(t, "damages")))
	})
}

// damage changes b in n places: a byte replaced or flipped, the bytes cut
// short, or a byte inserted.
func damage(r *rand.Rand, b []byte, n int) []byte {
	for range n {
		if len(b) == 0 {
			b = append(b, byte(r.Uint32()))
			continue
		}
		i := r.IntN(len(b))
		switch r.IntN(4) {
		case 0:
			b[i] = byte(r.Uint32())
		case 1:
			b[i] ^= 1 << r.IntN(8)
		case 2:
			b = b[:i]
		case 3:
			b = slices.Insert(b, i, []byte{0xff, 0x80, 0x08, 0x12, 0x02}[r.IntN(5)])
		}
	}
	return b
}

// TestUnmarshalEnvelope: log entries of mostly submits, as SubmitBatch
// writes them, with other commands and unknown fields among them, whole
// or damaged, decode by UnmarshalEnvelope exactly as by Unmarshal and by
// protobuf (sameDecoding compares all three).
func TestUnmarshalEnvelope(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 2))
		badUTF8 := rapid.SampledFrom([]int{0, 0, 5}).Draw(t, "badUTF8")
		env := &clusterpb.Envelope{Version: 1, StampMs: r.Int64()}
		for range rapid.IntRange(0, 40).Draw(t, "commands") {
			c := &clusterpb.Command{}
			if r.IntN(4) > 0 {
				job := &clusterpb.SubmitJob{}
				fill(r, job.ProtoReflect(), 2, badUTF8)
				c.Cmd = &clusterpb.Command_Submit{Submit: job}
			} else {
				fill(r, c.ProtoReflect(), 2, badUTF8)
			}
			env.Commands = append(env.Commands, c)
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(env)
		if err != nil {
			b, _ = env.MarshalVTStrict() // a string that is not UTF-8: the decoders refuse it
		}
		if rapid.Bool().Draw(t, "unknown") {
			at := r.IntN(len(b) + 1)
			b = slices.Insert(b, at, protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), []byte("x"))...)
		}
		if rapid.Bool().Draw(t, "damaged") {
			b = damage(r, b, rapid.IntRange(1, 3).Draw(t, "damages"))
		}
		sameDecoding(t, env.ProtoReflect().Type(), b)
	})
}

// TestUnmarshalEnvelopeAllocs: an entry of 100 submits costs its four
// strings a submit and one slice each of commands, oneofs, submits and
// command pointers, not three more objects a submit.
func TestUnmarshalEnvelopeAllocs(t *testing.T) {
	data, err := Marshal(entry100())
	if err != nil {
		t.Fatal(err)
	}
	env := &clusterpb.Envelope{}
	n := testing.AllocsPerRun(20, func() {
		if err := UnmarshalEnvelope(data, env); err != nil {
			t.Fatal(err)
		}
	})
	if n != 404 {
		t.Fatalf("%v allocations, want 404 (4 a submit and 4 slices)", n)
	}
}

func sameDecoding(t interface {
	Fatalf(string, ...any)
}, mt protoreflect.MessageType, b []byte) {
	want := mt.New().Interface()
	wantErr := proto.Unmarshal(b, want)
	got := mt.New().Interface()
	err := Unmarshal(b, got)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%s %x: Unmarshal error %v, protobuf's %v", mt.Descriptor().FullName(), b, err, wantErr)
	}
	if _, ok := got.(*clusterpb.Envelope); ok {
		env := &clusterpb.Envelope{Version: 7, Commands: []*clusterpb.Command{{}}} // UnmarshalEnvelope resets it
		envErr := UnmarshalEnvelope(b, env)
		if (envErr == nil) != (err == nil) || err == nil && !proto.Equal(env, got) {
			t.Fatalf("%x: UnmarshalEnvelope error %v, Unmarshal's %v;\n%v\nUnmarshal\n%v", b, envErr, err, env, got)
		}
	}
	if err == nil && !proto.Equal(canonicalTags(got.ProtoReflect()), want) {
		t.Fatalf("%s %x: Unmarshal\n%v\nprotobuf\n%v", mt.Descriptor().FullName(), b, got, want)
	}
}

// canonicalTags rewrites the tags of m's unknown fields (and those of the
// messages in it) in their shortest form, as protobuf's decoder keeps
// them; the generated decoder keeps them as they came. The fields and
// values are the same either way.
func canonicalTags(m protoreflect.Message) proto.Message {
	if u := m.GetUnknown(); len(u) > 0 {
		var out protoreflect.RawFields
		for len(u) > 0 {
			num, typ, n := protowire.ConsumeTag(u)
			u = u[n:]
			v := protowire.ConsumeFieldValue(num, typ, u)
			out = protowire.AppendTag(out, num, typ)
			out = append(out, u[:v]...)
			u = u[v:]
		}
		m.SetUnknown(out)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			for i := range v.List().Len() {
				canonicalTags(v.List().Get(i).Message())
			}
		case !fd.IsList() && !fd.IsMap() && fd.Kind() == protoreflect.MessageKind:
			canonicalTags(v.Message())
		}
		return true
	})
	return m.Interface()
}

// FuzzUnmarshalEnvelope: any bytes decode as a log entry exactly as
// protobuf decodes them.
func FuzzUnmarshalEnvelope(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		m := &clusterpb.Envelope{}
		fill(r, m.ProtoReflect(), 3, 0)
		b, err := Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x1a, 0x03, 0x0a, 0x01, 0xff})
	mt := (&clusterpb.Envelope{}).ProtoReflect().Type()
	f.Fuzz(func(t *testing.T, b []byte) {
		sameDecoding(t, mt, b)
	})
}

// TestUnmarshalResets: a message decoded into holds only what the bytes
// say, as with protobuf.
func TestUnmarshalResets(t *testing.T) {
	m := &clusterpb.Envelope{Version: 7, StampMs: 9}
	b, err := Marshal(&clusterpb.Envelope{Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := Unmarshal(b, m); err != nil {
		t.Fatal(err)
	}
	if m.Version != 1 || m.StampMs != 0 {
		t.Fatalf("got %v", m)
	}
}

func TestAppendMarshal(t *testing.T) {
	prefix := []byte("head")
	m := &clusterpb.Envelope{Version: 3, StampMs: 1234}
	out, err := AppendMarshal(slices.Clip(prefix), m)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proto.Marshal(m)
	if !bytes.Equal(out, append([]byte("head"), want...)) {
		t.Fatalf("got %x", out)
	}
}

// TestCodec: gRPC's "proto" codec is this package's once it is imported,
// and it writes protobuf's bytes, for a small message and for one large
// enough to go into gRPC's pooled buffers.
func TestCodec(t *testing.T) {
	c := encoding.GetCodecV2("proto")
	if _, ok := c.(Codec); !ok {
		t.Fatalf("the proto codec is %T", c)
	}
	for _, n := range []int{1, 5000} {
		m := &clusterpb.Envelope{Version: 1, StampMs: 99}
		for i := range n {
			m.Commands = append(m.Commands, &clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "tenant-ü", Job: uint64(i)}}})
		}
		data, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := proto.Marshal(m)
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("%d commands: %d bytes, protobuf %d", n, len(got), len(want))
		}
		back := &clusterpb.Envelope{}
		if err := c.Unmarshal(data, back); err != nil || !proto.Equal(back, m) {
			t.Fatalf("%d commands: back %v", n, err)
		}
		data.Free()
	}
	bad := &clusterpb.Envelope{Commands: []*clusterpb.Command{{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "\xff"}}}}}
	if _, err := c.Marshal(bad); !errors.Is(err, ErrInvalidUTF8) {
		t.Fatalf("a string that is not UTF-8: %v", err)
	}
}
