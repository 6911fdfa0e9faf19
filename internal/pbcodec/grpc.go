package pbcodec

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registered first, so this package's codec replaces it
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Importing this package makes every gRPC server and client of the process
// encode and decode with it (gRPC's "proto" codec is replaced at init, the
// only time gRPC allows it). The bytes on the wire are the same.
func init() {
	encoding.RegisterCodecV2(Codec{})
}

// Codec is gRPC's "proto" codec, done by this package.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// Name is the content-subtype gRPC uses by default.
func (Codec) Name() string { return "proto" }

// Marshal implements encoding.CodecV2. Large messages are written into
// gRPC's pooled buffers, as its own codec does.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("pbcodec: cannot marshal %T: not a protobuf message", v)
	}
	vt, ok := m.(vtMarshaler)
	if !ok {
		b, err := Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	size := vt.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := appendSized(nil, m, vt, size)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	b, err := appendSized((*buf)[:0], m, vt, size)
	if err != nil {
		pool.Put(buf)
		return nil, err
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal implements encoding.CodecV2. The message copies what it keeps,
// so the buffer goes back to the pool.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("pbcodec: cannot unmarshal into %T: not a protobuf message", v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return Unmarshal(buf.ReadOnlyData(), m)
}
