package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// claimingConn is a JXTA peer's connection that, in each frame holding
// mark, writes a new peer ID in place of own, the peer's own UUID in its
// peer ID: unsigned, nothing proves which peer a message is from, so the
// peer claims another for each one.
type claimingConn struct {
	net.Conn
	own, mark []byte
	n         int
}

func (c *claimingConn) Write(b []byte) (int, error) {
	if !bytes.Contains(b, c.mark) {
		return c.Conn.Write(b)
	}
	c.n++
	other := []byte(fmt.Sprintf("%08X", c.n))
	out := bytes.ReplaceAll(b, c.own, other)
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// sendClaimingNewIDs sends, unsigned, on the unicast pipe of the
// advertisement at advPath through the JXTA peer at addr, n messages
// that no receiver decodes (an encoded element whose header is garbage),
// each claiming a peer ID of its own, then one plain text message as the
// peer's own.
func sendClaimingNewIDs(t *testing.T, advPath, addr string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data, err := os.ReadFile(advPath)
	if err != nil {
		t.Fatal(err)
	}
	a, err := adv.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	ident, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	own := strings.TrimPrefix(ident.ID().String(), "urn:jxta:cbid-")[32:40] // in the peer's own UUID
	const mark = "claim another ID"
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &claimingConn{Conn: c, own: []byte(own), mark: []byte(mark)}, nil
	}
	nd, err := node.New(ctx, node.WithEphemeralKey(), node.WithListenAddrs(), node.WithLibp2pOptions(libp2p.NoListenAddrs))
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Close()
	ep, err := endpoint.New(nd, endpoint.WithJXTA(ident, "", jxtatcp.WithUnsigned(), jxtatcp.WithDialer(dial)))
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	ps, err := pipe.New(ep)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	out, err := ps.NewOutputPipe(ctx, a, pipe.ToJXTAPeers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	for i := range n {
		m := message.New(message.Text("", "note", mark),
			message.Element{Name: "x", MIME: encoding.MIME, Data: []byte(fmt.Sprint("not an encoding header ", i))})
		if err := out.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Send(ctx, message.New(message.Text("", "x", "plain"))); err != nil {
		t.Fatal(err)
	}
}

// TestRecvUnverifiedRefusalsCollapsed: a JXTA peer sending unsigned
// (recv --jxta-unsigned takes it) claims a new peer ID in each of 20
// messages recv refuses, on one connection: recv's lines about them are
// bounded by the peer's host, as a peer's are, since an unsigned peer ID
// is only a claim. Before, each claimed ID was a sender of its own: 20
// lines, one per message, however many the peer sent.
func TestRecvUnverifiedRefusalsCollapsed(t *testing.T) {
	t.Parallel()
	p := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", p, "--listen", loopback, "--jxta", "tcp://127.0.0.1:0", "--jxta-unsigned", "--count", "1")
	addr, _ := recv.jxtaAddr()
	const n = 20
	sendClaimingNewIDs(t, p, addr, n)
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv: exit %d, stderr %q", code, recv.stderr)
	}
	var lines []string
	senders := map[string]bool{}
	counted := 0
	more := regexp.MustCompile(`\(and (\d+) more from unverified JXTA peers at its host `)
	from := regexp.MustCompile(`message from (\S+) `)
	for _, l := range recv.stderr {
		if !strings.Contains(l, " refused: ") {
			continue
		}
		lines = append(lines, l)
		counted++
		if m := more.FindStringSubmatch(l); m != nil {
			k, _ := strconv.Atoi(m[1])
			counted += k
		}
		if m := from.FindStringSubmatch(l); m != nil {
			senders[m[1]] = true
		}
	}
	// The peer claimed an ID per message: the lines name more than one
	// (else nothing here was claimed).
	if counted != n || len(senders) < 2 || len(lines) >= n {
		t.Fatalf("%d messages claiming new IDs reported in %d lines, counting %d, naming %d senders; want fewer lines counting all, naming more than one: %q",
			n, len(lines), counted, len(senders), lines)
	}
}
