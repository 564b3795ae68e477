package pipe_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// line starts A - R - B: A and B each connected to R only, with no DHT,
// so that A can find what B binds only through R.
func line(t *testing.T) (a, r, b *node.Node) {
	t.Helper()
	a, r, b = testutil.NewNode(t), testutil.NewNode(t), testutil.NewNode(t)
	for _, n := range []*node.Node{a, b} {
		if err := n.Connect(context.Background(), r.AddrInfo()); err != nil {
			t.Fatal(err)
		}
	}
	return a, r, b
}

// resolveSoon resolves ad from s until it resolves or ctx ends: B's
// push reaches R in the background.
func resolveSoon(ctx context.Context, s *pipe.Service, ad *adv.PipeAdvertisement) (peer.ID, error) {
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		p, err := s.Resolve(rctx, ad, pipe.RoleInput)
		cancel()
		if err == nil || ctx.Err() != nil {
			return p, err
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return "", err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestBindingPushedAndReferred: B binds a pipe and tells R; A, connected
// to R only, is referred to B, and sends there. Once B unbinds, R refers
// nobody.
func TestBindingPushedAndReferred(t *testing.T) {
	a, r, b := line(t)
	sa, sr, sb := newPipes(t, a), newPipes(t, r), newPipes(t, b)
	ad := newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	got, err := resolveSoon(ctx(t), sa, ad)
	if err != nil || got != b.ID() {
		t.Fatalf("resolved to %s, %v; want B", got, err)
	}
	out, err := sa.NewOutputPipe(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := out.Send(ctx(t), message.New(message.Text("", "n", "via R"))); err != nil {
		t.Fatal(err)
	}
	if m, err := in.Receive(ctx(t)); err != nil || text(m, "n") != "via R" {
		t.Fatalf("B got %v, %v", m, err)
	}
	in.Close()
	for pipe.IndexSize(sr, b.ID()) != 0 {
		if err := sleepCtx(ctx(t), 20*time.Millisecond); err != nil {
			t.Fatal("R still refers to B after B unbound")
		}
	}
	if _, err := sa.Resolve(ctx(t), ad, pipe.RoleInput); !errors.Is(err, pipe.ErrNotResolved) {
		t.Fatalf("resolved an unbound pipe: %v", err)
	}
}

// pushRaw writes one binding message to s's node from n.
func pushRaw(t *testing.T, n *node.Node, to peer.ID, m *message.Message) {
	t.Helper()
	st, err := n.Host().NewStream(ctx(t), to, pipe.BindingProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := wire.Encode(st, m); err != nil {
		t.Fatal(err)
	}
	st.CloseWrite()
	io.Copy(io.Discard, st) // until the service has read it and closed
}

// TestPushedBindingsBounded: a neighbour that pushes more bindings than
// a node keeps for one peer, or malformed ones, has them ignored and
// counted; what it pushed goes when it disconnects.
func TestPushedBindingsBounded(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	flood, victim := nodes[0], nodes[1]
	sv := newPipes(t, victim)
	const pushes = 1100 // beyond the 1024 kept for one peer
	for range pushes {
		ad := newAdv(t, adv.Unicast)
		pushRaw(t, flood, victim.ID(), message.New(message.Text("jxta", "PipeId", ad.ID.String()), message.Text("jxta", "Role", pipe.RoleInput), message.Text("jxta", "Bound", "true")))
	}
	for _, bad := range []*message.Message{
		message.New(message.Text("jxta", "PipeId", newAdv(t, adv.Unicast).ID.String()), message.Text("jxta", "Role", pipe.RoleInput)),
		message.New(message.Text("jxta", "PipeId", newAdv(t, adv.Unicast).ID.String()), message.Text("jxta", "Role", pipe.RoleInput), message.Text("jxta", "Bound", "yes")),
		message.New(message.Text("jxta", "PipeId", "urn:jxta:nonsense"), message.Text("jxta", "Role", pipe.RoleInput), message.Text("jxta", "Bound", "true")),
	} {
		pushRaw(t, flood, victim.ID(), bad)
	}
	if n := pipe.IndexSize(sv, flood.ID()); n != 1024 {
		t.Fatalf("kept %d bindings of one neighbour, want the bound 1024", n)
	}
	if n := sv.Stats().IgnoredBindings; n != pushes-1024+3 {
		t.Fatalf("%d pushes ignored, want %d", n, pushes-1024+3)
	}
	flood.Host().Network().ClosePeer(victim.ID())
	for pipe.IndexSize(sv, flood.ID()) != 0 {
		if err := sleepCtx(ctx(t), 20*time.Millisecond); err != nil {
			t.Fatal("bindings kept after the neighbour disconnected")
		}
	}
}

// TestReferralsBounded: a peer that answers every query with fifty
// referrals, to peers at an address that only counts connection
// attempts, costs the resolving peer no more than the referrals it
// follows (4 peers, one address each here), and resolution fails
// cleanly.
func TestReferralsBounded(t *testing.T) {
	a, liar := testutil.NewNode(t), testutil.NewNode(t)
	if err := a.Connect(ctx(t), liar.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	sa := newPipes(t, a)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dials atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close()
		}
	}()
	sink, err := ma.NewMultiaddr("/ip4/127.0.0.1/tcp/" + portOf(ln.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	var refs []message.Element
	for i := range 50 { // the answer stays within the 4 KiB an answer may have
		if i%3 == 0 {
			refs = append(refs, message.Bytes("jxta", "Referral", []byte("not a multiaddr")))
			continue
		}
		_, pub, _ := crypto.GenerateEd25519Key(nil)
		id, _ := peer.IDFromPublicKey(pub)
		p2p, _ := ma.NewMultiaddr("/p2p/" + id.String())
		refs = append(refs, message.Bytes("jxta", "Referral", sink.Encapsulate(p2p).Bytes()))
	}
	answerNotFound(liar, 0, nil, refs...)
	if _, err := sa.Resolve(ctx(t), newAdv(t, adv.Unicast), pipe.RoleInput); !errors.Is(err, pipe.ErrNotResolved) {
		t.Fatalf("resolution through a liar's referrals: %v", err)
	}
	t.Logf("%d connection attempts to referred peers", dials.Load())
	if n := dials.Load(); n == 0 || n > 4 {
		t.Fatalf("%d connection attempts to referred peers, want 1 to 4", n)
	}
}

func portOf(a net.Addr) string {
	_, port, _ := net.SplitHostPort(a.String())
	return port
}

// TestPushForwardedToWaitingAsker: A asks R and S for a pipe nobody
// binds yet, and S never answers, so A's resolution waits. B, connected
// to R only, then binds it: R forwards B's push to A, which asks B and
// resolves while S still keeps its answer.
func TestPushForwardedToWaitingAsker(t *testing.T) {
	a, r, b := line(t)
	silent := testutil.NewNode(t)
	if err := a.Connect(ctx(t), silent.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	defer close(hold)
	silent.Host().SetStreamHandler(pipe.ResolverProtocol, func(st network.Stream) {
		<-hold
		st.Reset()
	})
	sa, sr, sb := newPipes(t, a), newPipes(t, r), newPipes(t, b)
	ad := newAdv(t, adv.Unicast)
	type result struct {
		p   peer.ID
		err error
	}
	res := make(chan result, 1)
	go func() {
		p, err := sa.Resolve(ctx(t), ad, pipe.RoleInput)
		res <- result{p, err}
	}()
	for pipe.PendingSize(sr) == 0 { // R has been asked, in vain
		if err := sleepCtx(ctx(t), 10*time.Millisecond); err != nil {
			t.Fatal("R never asked")
		}
	}
	in, err := sb.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	got := <-res
	if got.err != nil || got.p != b.ID() {
		t.Fatalf("resolved to %s, %v; want B", got.p, got.err)
	}
}

// TestPendingAsksBounded: a peer asking for more pipes than a node
// remembers askers of has the rest forgotten; once the askers remembered
// are older than pendingFor (10 s), a new one takes their room. The
// node's clock is the test's and stands still while it is asked: asks
// older than pendingFor make room for new ones, and under load the 1,100
// asks took 11 s (1,019 remembered, not 1,024).
func TestPendingAsksBounded(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	asker, victim := nodes[0], nodes[1]
	sv := newPipes(t, victim)
	start := time.Now()
	pipe.SetPendingClock(sv, func() time.Time { return start })
	ask := func() {
		t.Helper()
		st, err := asker.Host().NewStream(ctx(t), victim.ID(), pipe.ResolverProtocol)
		if err != nil {
			t.Fatal(err)
		}
		q := message.New(message.Text("jxta", "PipeId", newAdv(t, adv.Unicast).ID.String()), message.Text("jxta", "Role", pipe.RoleInput))
		if err := wire.Encode(st, q); err != nil {
			t.Fatal(err)
		}
		st.CloseWrite()
		if _, err := wire.Decode(io.LimitReader(st, 4096)); err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	const pipes = 1100 // beyond the 1024 remembered
	for range pipes {
		ask()
	}
	if n := pipe.PendingSize(sv); n != 1024 {
		t.Fatalf("%d askers remembered, want the bound 1024", n)
	}
	later := start.Add(11 * time.Second)
	pipe.SetPendingClock(sv, func() time.Time { return later })
	ask()
	if n := pipe.PendingSize(sv); n != 1 {
		t.Fatalf("%d askers remembered after the others expired, want the new one alone", n)
	}
}

// countingSink listens on loopback and counts the TCP connections made to
// it; hold keeps them open, so that a libp2p handshake there never ends,
// instead of closing them.
func countingSink(t *testing.T, hold bool) (ma.Multiaddr, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int64
	var mu sync.Mutex
	var held []net.Conn
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			if !hold {
				c.Close()
				continue
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	})
	sink, err := ma.NewMultiaddr("/ip4/127.0.0.1/tcp/" + portOf(ln.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	return sink, &dials
}

// referralTo is a jxta:Referral element naming p at addr.
func referralTo(t *testing.T, p peer.ID, addr ma.Multiaddr) message.Element {
	t.Helper()
	p2p, err := ma.NewMultiaddr("/p2p/" + p.String())
	if err != nil {
		t.Fatal(err)
	}
	return message.Bytes("jxta", "Referral", addr.Encapsulate(p2p).Bytes())
}

// answerNotFound makes n answer binding queries itself: after wait, "not
// found" with refs; before, what it does in the meantime.
func answerNotFound(n *node.Node, wait time.Duration, meantime func(pipeID, role string), refs ...message.Element) {
	answerQueries(n, func(q *message.Message) *message.Message {
		pid, _ := q.Get("jxta", "PipeId")
		role, _ := q.Get("jxta", "Role")
		if meantime != nil {
			meantime(string(pid.Data), string(role.Data))
		}
		time.Sleep(wait)
		ans := message.New(message.Text("jxta", "Found", "false"), message.Text("jxta", "PeerId", n.JXTAPeerID().String()))
		ans.Add(refs...)
		return ans
	})
}

// TestForwardedPushesBounded: a peer forwards pushed bindings only to an
// asker it could not answer (referral.go), so a resolution follows the
// referrals a peer forwards only once that peer has answered it in vain,
// and at most maxReferrals (4) of its referrals in all. A liar that floods
// the asking node with "forwarded pushes" naming fresh peers, before and
// after its answer, makes it dial at most 4 of them, not one per referral.
func TestForwardedPushesBounded(t *testing.T) {
	a, liar, silent := testutil.NewNode(t), testutil.NewNode(t), testutil.NewNode(t)
	for _, n := range []*node.Node{liar, silent} {
		if err := a.Connect(ctx(t), n.AddrInfo()); err != nil {
			t.Fatal(err)
		}
	}
	sa := newPipes(t, a, pipe.WithResolveTimeout(2*time.Second))
	sink, dials := countingSink(t, false)
	flood := func(pipeID, role string) {
		for range 50 {
			m := message.New(message.Text("jxta", "PipeId", pipeID), message.Text("jxta", "Role", role),
				message.Text("jxta", "Bound", "true"))
			for range 4 {
				m.Add(referralTo(t, testutil.FreshPeerID(t), sink))
			}
			st, err := liar.Host().NewStream(ctx(t), a.ID(), pipe.BindingProtocol)
			if err != nil {
				continue
			}
			wire.Encode(st, m)
			st.Close()
		}
	}
	floods := make(chan struct{})
	answerNotFound(liar, 0, func(pipeID, role string) {
		flood(pipeID, role) // before its answer
		go func() {
			defer close(floods)
			time.Sleep(50 * time.Millisecond)
			flood(pipeID, role) // and after
		}()
	})
	hold := make(chan struct{})
	silent.Host().SetStreamHandler(pipe.ResolverProtocol, func(st network.Stream) {
		<-hold // the resolution runs while the liar floods
		st.Reset()
	})
	_, err := sa.Resolve(ctx(t), newAdv(t, adv.Unicast), pipe.RoleInput)
	close(hold)
	<-floods
	if !errors.Is(err, pipe.ErrNotResolved) {
		t.Fatalf("resolution: %v", err)
	}
	t.Logf("%d connection attempts, %d referrals ignored", dials.Load(), sa.Stats().IgnoredReferrals)
	if n := dials.Load(); n > 4 {
		t.Fatalf("%d connection attempts to peers one liar named in forwarded pushes, want at most 4", n)
	}
}

// TestLiarsReferralDoesNotHideTheBinder: a liar refers A to the binder B
// at an address where no handshake ever ends; an honest neighbour R
// refers A to B where B is. A must still ask B at R's addresses.
func TestLiarsReferralDoesNotHideTheBinder(t *testing.T) {
	a, liar, r, b := testutil.NewNode(t), testutil.NewNode(t), testutil.NewNode(t), testutil.NewNode(t)
	for _, n := range []*node.Node{liar, r} {
		if err := a.Connect(ctx(t), n.AddrInfo()); err != nil {
			t.Fatal(err)
		}
	}
	sa, sb := newPipes(t, a, pipe.WithResolveTimeout(5*time.Second)), newPipes(t, b)
	ad := newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	sink, _ := countingSink(t, true)
	answerNotFound(liar, 0, nil, referralTo(t, b.ID(), sink))
	answerNotFound(r, 300*time.Millisecond, nil, referralTo(t, b.ID(), b.Host().Addrs()[0]))
	p, err := sa.Resolve(ctx(t), ad, pipe.RoleInput)
	if err != nil || p != b.ID() {
		t.Fatalf("resolved to %s, %v; want B", p, err)
	}
}

// TestIndexForgetsPushesOfGonePeers: neighbours push bindings and drop
// the connection at once. What they pushed goes with them, also a push
// read after the disconnect was handled: the index is for connected
// peers only, and fresh identities would otherwise grow it without bound.
func TestIndexForgetsPushesOfGonePeers(t *testing.T) {
	victim := testutil.NewNode(t)
	sv := newPipes(t, victim)
	var ids []peer.ID
	for range 10 {
		n := testutil.NewNode(t)
		if err := n.Connect(ctx(t), victim.AddrInfo()); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, n.ID())
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				st, err := n.Host().NewStream(ctx(t), victim.ID(), pipe.BindingProtocol)
				if err != nil {
					return
				}
				wire.Encode(st, message.New(message.Text("jxta", "PipeId", newAdv(t, adv.Unicast).ID.String()),
					message.Text("jxta", "Role", pipe.RoleInput), message.Text("jxta", "Bound", "true")))
				st.CloseWrite()
			})
		}
		wg.Wait()
		n.Close()
	}
	for _, p := range ids {
		for victim.Host().Network().Connectedness(p) == network.Connected {
			if err := sleepCtx(ctx(t), 10*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The disconnect notices and any push still being read have run.
	if err := sleepCtx(ctx(t), time.Second); err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, p := range ids {
		kept += pipe.IndexSize(sv, p)
	}
	if kept > 0 {
		t.Fatalf("%d bindings of disconnected peers kept in the referral index", kept)
	}
}

// TestKnownBinderAskedFirst: A is connected to more peers than it asks
// (WithQueryPeers), and to the binder B, which pushed it the binding. A
// asks B first, so every resolution finds it, whoever else is connected.
func TestKnownBinderAskedFirst(t *testing.T) {
	a, b := testutil.NewNode(t), testutil.NewNode(t)
	sa, sb := newPipes(t, a, pipe.WithQueryPeers(4)), newPipes(t, b)
	for range 16 { // none speaks the resolver protocol
		if err := testutil.NewNode(t).Connect(ctx(t), a.AddrInfo()); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Connect(ctx(t), a.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	ad := newAdv(t, adv.Unicast)
	in, err := sb.NewInputPipe(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for pipe.IndexSize(sa, b.ID()) == 0 { // A was told B binds it
		if err := sleepCtx(ctx(t), 10*time.Millisecond); err != nil {
			t.Fatal("B's push never reached A")
		}
	}
	for i := range 10 {
		if p, err := sa.Resolve(ctx(t), ad, pipe.RoleInput); err != nil || p != b.ID() {
			t.Fatalf("resolution %d: %s, %v; want B", i, p, err)
		}
	}
}

// TestResolveTimeoutSaysWhose: a given peer that accepts the connection
// and never answers holds a resolution until the service's resolve
// timeout, and the error says that this timeout ended it, not the
// caller's context (which has no deadline); it still matches
// context.DeadlineExceeded.
func TestResolveTimeoutSaysWhose(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Add(1)
	go func() { // accepts, reads nothing, answers nothing
		defer wg.Done()
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	silent := peer.AddrInfo{ID: testutil.FreshPeerID(t), Addrs: []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))}}
	s := newPipes(t, testutil.NewNode(t), pipe.WithResolveTimeout(300*time.Millisecond))
	_, err = s.Resolve(context.Background(), newAdv(t, adv.Unicast), pipe.RoleInput, pipe.ToPeers(silent))
	if !errors.Is(err, pipe.ErrNotResolved) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "the resolve timeout, 300ms") {
		t.Fatalf("resolving at a silent peer: %v; want ErrNotResolved, context.DeadlineExceeded and the resolve timeout named", err)
	}
	// The caller's own ctx ending first leads the error: not "no peer
	// found with the pipe bound", which the caller did not wait to learn.
	s = newPipes(t, testutil.NewNode(t), pipe.WithResolveTimeout(time.Hour))
	for _, end := range []error{context.DeadlineExceeded, context.Canceled} {
		ctx, cancel := context.WithCancel(context.Background())
		if end == context.Canceled {
			time.AfterFunc(300*time.Millisecond, cancel)
		} else {
			ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
		}
		_, err = s.Resolve(ctx, newAdv(t, adv.Unicast), pipe.RoleInput, pipe.ToPeers(silent))
		cancel()
		if !errors.Is(err, pipe.ErrNotResolved) || !errors.Is(err, end) || !strings.HasPrefix(err.Error(), "pipe: resolving ") ||
			!strings.Contains(err.Error(), "as input: "+end.Error()+" (asked 0 of 1 given peer)") {
			t.Errorf("the caller's ctx ended (%v): %v; want ErrNotResolved, and its end first", end, err)
		}
	}
}
