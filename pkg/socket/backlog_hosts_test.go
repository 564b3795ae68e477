package socket_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// Four libp2p identities on one host (127.0.0.1), each dialling up to a
// peer's share and waiting, take the host's share of the backlog and no
// more: before, they took all 64 places and every other peer was refused
// until the application accepted. A peer on another host (127.0.0.2)
// still gets in, and Accept gives the host a place back.
func TestOneHostsIdentitiesCannotTakeTheBacklog(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 5) // the victim and four identities, all on 127.0.0.1
	victim := newSockets(t, nodes[0])
	honest := newSockets(t, testutil.NodeOnHost(t, "127.0.0.2", nodes[0]))
	a := newAdv(t, adv.Unicast)
	l, err := victim.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const share = 64 / 4
	var attackers []*socket.Service
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	var refusals []error
	for _, n := range nodes[1:] {
		s := newSockets(t, n)
		attackers = append(attackers, s)
		for range share {
			c, err := s.Dial(ctx(t), a)
			if err != nil {
				refusals = append(refusals, err)
				break
			}
			held = append(held, c)
		}
	}
	if len(held) != share {
		t.Fatalf("four identities on one host hold %d places of 64, want the host's share, %d", len(held), share)
	}
	for _, err := range refusals {
		if !errors.Is(err, socket.ErrRefused) || !strings.Contains(err.Error(), "host's share") {
			t.Fatalf("dial beyond the host's share: %v", err)
		}
	}
	c, err := honest.Dial(ctx(t), a)
	if err != nil {
		t.Fatalf("a peer on another host, with the backlog three quarters free: %v", err)
	}
	held = append(held, c)
	if st := victim.Stats(); st.HostBacklog != 3 || st.PeerBacklog != 0 || st.BacklogFull != 0 {
		t.Fatalf("stats %+v, want three refusals for the host's share", st)
	}
	if _, err := l.Accept(); err != nil {
		t.Fatal(err)
	}
	c, err = attackers[3].Dial(ctx(t), a)
	if err != nil {
		t.Fatalf("dial after Accept freed one of the host's places: %v", err)
	}
	held = append(held, c)
}

// Four JXTA identities sending connect requests over their connections
// from one host (127.0.0.1) take the host's share of the backlog and no
// more, whatever peer IDs the requests claim: before, they took all 64
// places. A JXTA peer on another host (127.0.0.2) still gets in.
func TestOneJXTAHostsIdentitiesCannotTakeTheBacklog(t *testing.T) {
	s, l, a, addr, first := hostileListener(t, "hostile-host-backlog")
	const share = 64 / 4
	sendRequests(t, first, addr, a, share)
	until(t, "the first identity's requests in the backlog", func() bool { return socket.BacklogLen(l) == share })
	for range 3 {
		sendRequests(t, newHostileJXTA(t), addr, a, share)
	}
	until(t, "every request in the backlog or refused", func() bool {
		return uint64(socket.BacklogLen(l))+s.JXTAStats().Refused == 4*share
	})
	if n := socket.BacklogLen(l); n != share {
		t.Fatalf("four identities on one host hold %d places of 64, want the host's share, %d", n, share)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}} // another host
	sendRequests(t, newHostileJXTA(t, jxtatcp.WithDialer(d.DialContext)), addr, a, 1)
	until(t, "the other host's request taken or refused", func() bool {
		return uint64(socket.BacklogLen(l))+s.JXTAStats().Refused == 4*share+1
	})
	if n := socket.BacklogLen(l); n != share+1 {
		t.Fatalf("the other host's request refused: %d in the backlog, %+v", n, s.JXTAStats())
	}
	if st := s.JXTAStats(); st.Refused != 3*share || st.HostBacklog != 3*share {
		t.Fatalf("%+v, want %d refused for the host's share", st, 3*share)
	}
}
