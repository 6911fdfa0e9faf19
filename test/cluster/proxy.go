package cluster

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a target; Block black-holes them
// (bytes are read and dropped, nothing is closed), as a network partition
// does.
type Proxy struct {
	Addr   string
	target string
	ln     net.Listener

	mu      sync.Mutex
	blocked bool
	conns   []net.Conn
}

// NewProxy starts a proxy to target on a free loopback port; it stops when
// the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln}
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

func (p *Proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			blocked := p.blocked
			p.mu.Unlock()
			if !blocked {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			return
		}
	}
}

// Block drops every byte from now on, in both directions.
func (p *Proxy) Block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
}

// Close stops the proxy and its connections.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
