package test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// stalledCalls is one HTTP/2 connection on which a client opens unary
// gRPC calls whose request messages declare size bytes, and sends every
// byte of each but the last one, as fast as the server's flow control
// lets it: the way to make a server hold request bytes it cannot use.
type stalledCalls struct {
	conn net.Conn
	fr   *http2.Framer
	mu   sync.Mutex // the framer's writes; the fields below

	sendWindow int64            // the connection's
	windows    map[uint32]int64 // each stream's
	left       map[uint32][]byte
	initial    int64
	// answers counts the streams the server ended: by grpc-status code,
	// "RST" for a reset.
	answers map[string]int
	ended   map[uint32]bool
	sent    int64
	wake    chan struct{}
	done    chan struct{}
}

// stallCalls opens n calls of method on addr (plaintext HTTP/2) with the
// given authorization ("" none), each declaring size bytes.
func stallCalls(addr, method, authorization string, n, size int) (*stalledCalls, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	s := &stalledCalls{conn: c, fr: http2.NewFramer(c, c), sendWindow: 65535, windows: map[uint32]int64{}, left: map[uint32][]byte{},
		initial: 65535, answers: map[string]int{}, ended: map[uint32]bool{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return nil, err
	}
	if err := s.fr.WriteSettings(); err != nil {
		return nil, err
	}
	go s.read()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := range n {
		id := uint32(2*i + 1)
		hb.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", addr},
			{"content-type", "application/grpc"}, {"te", "trailers"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if authorization != "" {
			enc.WriteField(hpack.HeaderField{Name: "authorization", Value: authorization})
		}
		msg := make([]byte, 5+size-1)
		binary.BigEndian.PutUint32(msg[1:5], uint32(size))
		s.mu.Lock()
		s.windows[id] = s.initial
		s.left[id] = msg
		err := s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	go s.write()
	return s, nil
}

// read takes the server's frames: windows, answers, settings.
func (s *stalledCalls) read() {
	defer close(s.done)
	for {
		f, err := s.fr.ReadFrame()
		if err != nil {
			return
		}
		s.mu.Lock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				f.ForeachSetting(func(st http2.Setting) error {
					if st.ID == http2.SettingInitialWindowSize {
						for id := range s.windows {
							s.windows[id] += int64(st.Val) - s.initial
						}
						s.initial = int64(st.Val)
					}
					return nil
				})
				s.fr.WriteSettingsAck()
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				s.sendWindow += int64(f.Increment)
			} else if _, ok := s.windows[f.StreamID]; ok {
				s.windows[f.StreamID] += int64(f.Increment)
			}
		case *http2.MetaHeadersFrame:
			if st := f.PseudoValue("status"); f.StreamEnded() || st != "" && st != "200" {
				code := "?"
				for _, h := range f.Fields {
					if h.Name == "grpc-status" {
						code = h.Value
					}
				}
				if !s.ended[f.StreamID] {
					s.answers[code]++
				}
				s.ended[f.StreamID] = true
				delete(s.left, f.StreamID)
			}
		case *http2.RSTStreamFrame:
			if !s.ended[f.StreamID] {
				s.answers["RST"]++
			}
			s.ended[f.StreamID] = true
			delete(s.left, f.StreamID)
		case *http2.PingFrame:
			if !f.IsAck() {
				s.fr.WritePing(true, f.Data)
			}
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// write sends what the windows allow, until the connection ends.
func (s *stalledCalls) write() {
	for {
		s.mu.Lock()
		for id, rest := range s.left {
			n := min(int64(len(rest)), s.windows[id], s.sendWindow, 16<<10)
			if n <= 0 {
				continue
			}
			if s.fr.WriteData(id, false, rest[:n]) != nil {
				s.mu.Unlock()
				return
			}
			s.left[id], s.windows[id], s.sendWindow, s.sent = rest[n:], s.windows[id]-n, s.sendWindow-n, s.sent+n
		}
		s.mu.Unlock()
		select {
		case <-s.done:
			return
		case <-s.wake:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// state reports the answers so far and the bytes sent.
func (s *stalledCalls) state() (map[string]int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.answers))
	for k, v := range s.answers {
		out[k] = v
	}
	return out, s.sent
}

// answered is the answers as text: "code:count" sorted by code.
func answered(m map[string]int) string {
	var parts []string
	for _, k := range []string{"?", "0", "3", "7", "8", "14", "16", "RST"} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
		}
	}
	return strings.Join(parts, " ")
}

// close ends the connection.
func (s *stalledCalls) close() {
	s.conn.Close()
	<-s.done
}
