package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// TCPLayer is the baseline: a raw TCP connection on loopback with
// TCP_NODELAY, each message preceded by a 4-byte length.
type TCPLayer struct{}

// Name implements Layer.
func (TCPLayer) Name() string { return "tcp" }

// Transport is the one the layer runs on, whatever the study's: raw TCP.
func (TCPLayer) Transport() string { return TransportTCP }

// Open implements Layer; the transport argument is ignored.
func (TCPLayer) Open(ctx context.Context, _ string) (Pair, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &tcpPair{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.server = c
		p.mu.Unlock()
		c.(*net.TCPConn).SetNoDelay(true)
		echoFramed(c, c)
	}()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		p.Close()
		return nil, err
	}
	c.(*net.TCPConn).SetNoDelay(true)
	p.client = c
	return p, nil
}

type tcpPair struct {
	ln     net.Listener
	client net.Conn
	mu     sync.Mutex
	server net.Conn
	wg     sync.WaitGroup
	buf    []byte
}

func (p *tcpPair) RoundTrip(ctx context.Context, payload []byte) error {
	return framedRoundTrip(ctx, p.client, p.client, payload, &p.buf)
}

func (p *tcpPair) WireBytes(int) int { return 4 }

func (p *tcpPair) Close() error {
	p.ln.Close()
	if p.client != nil {
		p.client.Close()
	}
	p.mu.Lock()
	if p.server != nil {
		p.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// framedRoundTrip writes a length-prefixed payload and reads the echo into
// *buf. The context is checked before the exchange only: the pairs are on
// loopback and are closed by their owner to stop a stuck exchange.
func framedRoundTrip(ctx context.Context, w io.Writer, r io.Reader, payload []byte, buf *[]byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(payload)))
	if len(payload) <= 64<<10 {
		// One write: header and payload in one segment, as the
		// endpoint's encoder does for small messages.
		if cap(*buf) < 4+len(payload) {
			*buf = make([]byte, 4+len(payload))
		}
		b := append((*buf)[:0], hdr[:]...)
		b = append(b, payload...)
		if _, err := w.Write(b); err != nil {
			return err
		}
	} else {
		if _, err := w.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := w.Write(payload); err != nil {
			return err
		}
	}
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n != len(payload) {
		return fmt.Errorf("echo of %d bytes for %d sent", n, len(payload))
	}
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	_, err := io.ReadFull(r, (*buf)[:n])
	return err
}

// echoFramed reflects length-prefixed messages until the stream ends.
func echoFramed(r io.Reader, w io.Writer) error {
	var hdr [4]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr[:]))
		if n > 1<<30 {
			return fmt.Errorf("lab: echo frame of %d bytes", n)
		}
		if cap(buf) < 4+n {
			buf = make([]byte, 4+n)
		}
		b := buf[:4+n]
		copy(b, hdr[:])
		if _, err := io.ReadFull(r, b[4:]); err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
}
