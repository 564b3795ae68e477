package pipe_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/internal/jxtatest"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// jxtaPipes starts a node that is also a JXTA peer, with its pipe
// service.
func jxtaPipes(t testing.TB, opts ...jxtatcp.Option) (*pipe.Service, *jxtatcp.Identity) {
	t.Helper()
	ep, ident := jxtatest.NewEndpoint(t, opts...)
	s, err := pipe.New(ep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ident
}

// TestJXSEUnicastPipes: unicast pipes with a live JXSE 2.7 peer, both
// ways, through the same pipe API as libp2p pipes: p2pmsg resolves a pipe
// JXSE binds (PBP over JXTA's resolver) and sends on it; JXSE resolves a
// pipe p2pmsg binds and sends on it, and p2pmsg's Receive gets it.
func TestJXSEUnicastPipes(t *testing.T) {
	jxtatest.SigningModes(t, func(t *testing.T, unsigned bool, opts []jxtatcp.Option) {
		{
			t.Parallel()
			peer := jxse.StartPeer(t, jxse.PeerOptions{Unsigned: unsigned})
			s, ident := jxtaPipes(t, opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()

			// p2pmsg → JXSE.
			toJXSE := seededAdv(t, "p2pmsg-test-to-jxse")
			if err := peer.Command("pipelisten " + toJXSE.ID.String()); err != nil {
				t.Fatal(err)
			}
			out, err := s.NewOutputPipe(ctx, toJXSE, pipe.ToJXTAPeers(peer.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			for i, text := range []string{"one", "two"} {
				if err := out.Send(ctx, message.New(message.Text("study", "text", text))); err != nil {
					t.Fatal(err)
				}
				r, err := peer.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if r.Service != "PipeService" || r.Param != toJXSE.ID.String() || r.Text != text {
					t.Fatalf("message %d: JXSE got %+v", i, r)
				}
			}

			// JXSE → p2pmsg, on a pipe bound here.
			toGo := seededAdv(t, "p2pmsg-test-to-go")
			in, err := s.NewInputPipe(toGo)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			for _, text := range []string{"three", "four"} {
				if err := peer.Command("pipesend " + toGo.ID.String() + " " + ident.ID().String() + " " + text); err != nil {
					t.Fatal(err)
				}
				r, err := in.ReceiveFrom(ctx)
				if err != nil {
					t.Fatalf("%v (JXTA transport %+v, endpoint %+v); JXSE log: %s", err, s.Endpoint().JXTA().Stats(), s.Endpoint().Stats(), peer.Log())
				}
				e, _ := r.Message.Get("study", "text")
				if string(e.Data) != text || r.FromJXTA.String() != peer.ID || r.From != "" || r.Unverified != unsigned {
					t.Fatalf("received %q from %v (libp2p %q, unverified %v)", e.Data, r.FromJXTA, r.From, r.Unverified)
				}
				if strings.Contains(r.Message.At(r.Message.Len()-1).Name, "Endpoint") {
					t.Fatalf("transport elements reached the pipe: %v", r.Message.Elements())
				}
				r.Release()
			}
		}
	})
}

// seededAdv is a unicast pipe advertisement whose ID is derived from
// seed in the net peer group, as JXSE applications make theirs.
func seededAdv(t testing.TB, seed string) *adv.PipeAdvertisement {
	t.Helper()
	pid, err := id.PipeIDFromSeed(id.NetPeerGroupID, []byte(seed))
	if err != nil {
		t.Fatal(err)
	}
	return &adv.PipeAdvertisement{ID: pid, Type: adv.Unicast, Name: seed}
}

// TestJXTAForgedAnswerRefused: a JXTA peer that answers a pipe binding
// query in another peer's name is not believed: the answer is counted
// as unproven and the pipe is not resolved to the peer it names.
func TestJXTAForgedAnswerRefused(t *testing.T) {
	ident, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	nodes := testutil.NewConnectedNodes(t, 1)
	ep, err := endpoint.New(nodes[0], endpoint.WithJXTA(ident, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	s, err := pipe.New(ep, pipe.WithResolveTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The liar answers every query: found, at a peer that is not itself.
	liarID, _ := jxtatcp.NewIdentity()
	victim, _ := jxtatcp.NewIdentity()
	var liar *jxtatcp.Transport
	answered := make(chan struct{}, 8)
	liar, err = jxtatcp.New(liarID, func(in *jxtatcp.Incoming) {
		e, ok := in.Message.Get("jxta", "jxta-NetGroupORes")
		if !ok {
			return
		}
		q := string(e.Data)
		qid := q[strings.Index(q, "<QueryID>")+len("<QueryID>") : strings.Index(q, "</QueryID>")]
		pid := q[strings.Index(q, "PipeId&gt;")+len("PipeId&gt;"):]
		pid = pid[:strings.Index(pid, "&lt;")]
		answer := "<?xml version=\"1.0\"?><jxta:PipeResolver xmlns:jxta=\"http://jxta.org\"><MsgType>Answer</MsgType><PipeId>" + pid +
			"</PipeId><Type>JxtaUnicast</Type><Peer>" + victim.ID().String() + "</Peer><Found>true</Found></jxta:PipeResolver>"
		answer = strings.NewReplacer("&", "&amp;", "<", "&lt;").Replace(answer)
		doc := "<?xml version=\"1.0\"?><jxta:ResolverResponse xmlns:jxta=\"http://jxta.org\"><HandlerName>JxtaPipeResolver</HandlerName><QueryID>" +
			qid + "</QueryID><Response>" + answer + "</Response></jxta:ResolverResponse>"
		m := message.New(message.Element{Namespace: "jxta", Name: "jxta-NetGroupIRes", MIME: message.XMLUTF8, Data: []byte(doc)})
		go func() {
			liar.Send(context.Background(), "jxta://"+strings.TrimPrefix(in.Source.String(), "urn:jxta:"), pipe.JXTAResolverService, "jxta-NetGroupIRes", m)
			answered <- struct{}{}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer liar.Close()
	if err := liar.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	_, err = s.NewOutputPipe(ctx(t), seededAdv(t, "forged"), pipe.ToJXTAPeers(liar.Addrs()[0]))
	if !errors.Is(err, pipe.ErrNotResolved) {
		t.Fatalf("resolved through a forged answer: %v", err)
	}
	select {
	case <-answered:
	default:
		t.Fatal("the liar never answered: the test proved nothing")
	}
	if n := s.Stats().UnprovenAnswers; n == 0 {
		t.Fatalf("forged answers not counted: %+v", s.Stats())
	}
}

// TestJXTAPeersRefusingFailAtOnce: a pipe resolved among JXTA peers none
// of which can be asked (each refuses the connection) fails at once,
// naming the cause, as among libp2p peers. Before, it asked again every
// 3 s until the resolve timeout (10 s by default; here an hour, so the
// old code ran into the test's ctx instead).
func TestJXTAPeersRefusingFailAtOnce(t *testing.T) {
	ep, _ := jxtatest.NewEndpoint(t)
	s, err := pipe.New(ep, pipe.WithResolveTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "tcp://" + ln.Addr().String()
	ln.Close()
	c, cancel := context.WithTimeout(ctx(t), time.Minute)
	defer cancel()
	_, err = s.NewOutputPipe(c, seededAdv(t, "nobody"), pipe.ToJXTAPeers(closed))
	if c.Err() != nil {
		t.Fatalf("resolution waited for its ctx: %v", err)
	}
	if !errors.Is(err, pipe.ErrNotResolved) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("resolution among refusing JXTA peers: %v; want ErrNotResolved and ECONNREFUSED", err)
	}
}
