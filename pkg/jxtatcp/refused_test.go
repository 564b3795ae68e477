package jxtatcp

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// A dial to a port nothing listens on is refused, as the system says it
// (ECONNREFUSED; WSAECONNREFUSED on Windows, which errors.Is does not
// match to it); a dial that fails otherwise is not.
func TestRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = net.Dial("tcp", addr)
	if err == nil || !refused(err) {
		t.Fatalf("dial to a closed port: %v, want it refused", err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	var d net.Dialer
	if _, err := d.DialContext(ctx, "tcp", addr); err == nil || refused(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial past its deadline: %v, want a timeout, not refused", err)
	}
}
