package pbcodec

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/baristahq/barista/proto/clusterpb"
)

const (
	envelopeCommands = 4        // barista.Envelope.commands
	commandSubmit    = 1<<3 | 2 // barista.Command.submit's tag, in its one-byte form
)

// UnmarshalEnvelope decodes a log entry into env exactly as Unmarshal
// would, with fewer allocations: the entry's commands, and the submits
// among them, are allocated together, a slice of each, rather than three
// objects a submit (the Command, its oneof and the SubmitJob). The decoded
// commands share those slices, so whoever keeps one command keeps the
// entry's: callers use a decoded entry and drop it (the state machine
// copies what it keeps).
//
// It decodes the envelope field by field with the generated code, which
// has no state between fields but the message, so the result is the one
// decoding all of it at once gives. Anything it does not take this way
// (bytes that do not parse, a command the generated decoder refuses, a
// string that is not UTF-8) goes to Unmarshal, whose answer is protobuf's.
func UnmarshalEnvelope(b []byte, env *clusterpb.Envelope) error {
	proto.Reset(env)
	if err := unmarshalEnvelope(b, env); err == nil {
		if err := check(b, env.ProtoReflect().Descriptor()); err == nil {
			return nil
		}
	}
	return Unmarshal(b, env)
}

func unmarshalEnvelope(b []byte, env *clusterpb.Envelope) error {
	var cmds, submits int
	for rest := b; len(rest) > 0; {
		num, typ, tl := protowire.ConsumeTag(rest)
		if tl < 0 {
			return protowire.ParseError(tl)
		}
		vl := protowire.ConsumeFieldValue(num, typ, rest[tl:])
		if vl < 0 {
			return protowire.ParseError(vl)
		}
		if num == envelopeCommands && typ == protowire.BytesType {
			cmds++
			if v, _ := protowire.ConsumeBytes(rest[tl:]); len(v) > 0 && v[0] == commandSubmit {
				submits++
			}
		}
		rest = rest[tl+vl:]
	}
	slab := make([]clusterpb.Command, cmds)
	jobs := make([]clusterpb.SubmitJob, submits)
	oneofs := make([]clusterpb.Command_Submit, submits)
	env.Commands = make([]*clusterpb.Command, 0, cmds)
	for rest := b; len(rest) > 0; {
		num, typ, tl := protowire.ConsumeTag(rest)
		vl := protowire.ConsumeFieldValue(num, typ, rest[tl:])
		f := rest[:tl+vl]
		rest = rest[tl+vl:]
		if num != envelopeCommands || typ != protowire.BytesType {
			// Any other field, known or not, or a command of the wrong
			// wire type, which the generated decoder refuses.
			if err := env.UnmarshalVT(f); err != nil {
				return err
			}
			continue
		}
		v, _ := protowire.ConsumeBytes(f[tl:])
		c := &slab[len(env.Commands)]
		if len(v) > 0 && v[0] == commandSubmit {
			// The generated decoder decodes a submit into the oneof
			// it finds set, as it would into the one it would make.
			oneofs[0].Submit = &jobs[0]
			c.Cmd = &oneofs[0]
			jobs, oneofs = jobs[1:], oneofs[1:]
		}
		if err := c.UnmarshalVT(v); err != nil {
			return err
		}
		env.Commands = append(env.Commands, c)
	}
	return nil
}
