package pipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/beevik/etree"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Pipes shared with JXTA peers. When the endpoint is also a JXTA peer
// (endpoint.WithJXTA), the service speaks JXTA's resolver protocol and
// pipe binding protocol (PBP) with JXSE 2.7 peers: it answers their
// queries for the unicast input pipes bound here, for as long as they
// are bound, and resolves pipes they bind (ToJXTAPeers). Unicast pipe
// messages travel both ways as JXSE sends them: to the endpoint listener
// PipeService/<pipe ID>, with the application's elements only. Secure
// pipes are not offered to JXTA peers: JXTA's TCP transport does not
// encrypt.

// The net peer group's resolver, as JXSE names it on the wire.
const (
	JXTAResolverService = "urn:jxta:uuid-DEADBEEFDEAFBABAFEEDBABE0000000205"
	jxtaQueryParam      = "jxta-NetGroupORes"
	jxtaResponseParam   = "jxta-NetGroupIRes"
	jxtaPipeHandler     = "JxtaPipeResolver"
	// JXTAPipeService is the endpoint service of JXTA pipe messages; the
	// parameter is the pipe ID.
	JXTAPipeService = "PipeService"
)

// maxJXTADoc bounds a resolver document: JXSE's carry a credential and a
// peer advertisement and take 4–6 KiB.
const maxJXTADoc = 64 << 10

// maxJXTADocTags bounds the markup of a resolver document, its tags and
// attributes together (its '<' and '='): the wire study's captures have
// at most 36 tags, and their documents fewer than 30 '='. Parsing costs
// by the element and by the attribute, not by the byte: a 64 KiB query
// of 16,000 empty elements took 5.8 ms of CPU and 2.5 MB, 64 times what
// a frame the transport reads and drops costs, and a peer sending them
// on 150 connections held 500 MB and both cores for a minute after it
// stopped (its frames were in the sockets); one element of 9,000
// attributes cost as much.
const maxJXTADocTags = 512

// errJXTADocBounds: a resolver document over maxJXTADoc or
// maxJXTADocTags.
var errJXTADocBounds = errors.New("over the bounds of a JXTA resolver document")

// jxtaResolver is the service's side of JXTA's resolver.
type jxtaResolver struct {
	s       *Service
	self    id.ID
	mu      sync.Mutex
	pending map[int32]chan pbpAnswer // by query ID, random (see resolve)
	// answering holds a slot per answer being sent (maxJXTAAnswers);
	// hostAnswers counts them by the remote host of the query's
	// connection (maxJXTAAnswersPerHost), under mu.
	answering   chan struct{}
	hostAnswers map[netip.Prefix]int
}

// maxJXTAAnswers bounds the binding answers being sent at once. A JXSE
// peer asks for a pipe once per resolution and waits for the answer, so
// a few peers resolving at once need a few; a peer that floods queries
// while it does not read would otherwise hold a goroutine per query for
// the answer's timeout. Queries beyond it are dropped and counted
// (Stats.JXTARefused); the JXSE client asks again.
const maxJXTAAnswers = 32

// maxJXTAAnswersPerHost bounds the answers being sent at once to the
// queriers of one remote host (an IPv4 address, an IPv6 /64; a claimed
// JXTA peer ID costs nothing): a quarter of maxJXTAAnswers, as the
// transport's slots and budgets are shared. The last quarter of the
// slots is kept for hosts with no answer in flight, one each, so that
// hosts whose peers do not read their answers (each then waits up to
// 30 s) keep out another host's first query only when they are eleven:
// three holding a quarter each and eight holding one of the rest.
const maxJXTAAnswersPerHost = maxJXTAAnswers / 4

type pbpAnswer struct {
	pipe  id.ID
	typ   string
	peer  id.ID
	found bool
}

// startJXTA registers the resolver's listeners when the endpoint is a
// JXTA peer.
func (s *Service) startJXTA() error {
	t := s.ep.JXTA()
	if t == nil {
		return nil
	}
	r := &jxtaResolver{s: s, self: t.ID(), pending: map[int32]chan pbpAnswer{}, answering: make(chan struct{}, maxJXTAAnswers),
		hostAnswers: map[netip.Prefix]int{}}
	if err := s.ep.Register(JXTAResolverService, jxtaQueryParam, endpoint.ListenerFunc(r.query)); err != nil {
		return err
	}
	if err := s.ep.Register(JXTAResolverService, jxtaResponseParam, endpoint.ListenerFunc(r.response)); err != nil {
		s.ep.Unregister(JXTAResolverService, jxtaQueryParam)
		return err
	}
	s.jxta = r
	return nil
}

func (s *Service) stopJXTA() {
	if s.jxta != nil {
		s.ep.Unregister(JXTAResolverService, jxtaQueryParam)
		s.ep.Unregister(JXTAResolverService, jxtaResponseParam)
	}
}

func parseDoc(b []byte, root string) (*etree.Element, error) {
	if len(b) > maxJXTADoc {
		return nil, fmt.Errorf("%w: %s document of %d bytes", errJXTADocBounds, root, len(b))
	}
	if n := bytes.Count(b, []byte("<")) + bytes.Count(b, []byte("=")); n > maxJXTADocTags {
		return nil, fmt.Errorf("%w: %s document of %d tags and attributes, at most %d", errJXTADocBounds, root, n, maxJXTADocTags)
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(b); err != nil {
		return nil, err
	}
	r := doc.Root()
	if r == nil || r.Tag != root {
		return nil, fmt.Errorf("not a jxta:%s document", root)
	}
	return r, nil
}

func childText(e *etree.Element, tag string) string {
	if c := e.SelectElement(tag); c != nil {
		return strings.TrimSpace(c.Text())
	}
	return ""
}

// newDoc starts a JXTA document as JXSE writes them.
func newDoc(root string) (*etree.Document, *etree.Element) {
	doc := etree.NewDocument()
	doc.CreateProcInst("xml", `version="1.0" encoding="UTF-8"`)
	doc.CreateDirective("DOCTYPE jxta:" + root)
	r := doc.CreateElement("jxta:" + root)
	r.CreateAttr("xmlns:jxta", "http://jxta.org")
	return doc, r
}

func docBytes(doc *etree.Document) []byte {
	b, _ := doc.WriteToBytes()
	return b
}

// pbpQuery is a pipe binding query, as a resolver query carries it.
type pbpQuery struct {
	qid      int32
	src      id.ID
	pipe     id.ID
	typ      string
	directed bool
	peers    []id.ID
}

// parsePBPQuery reads a resolver query document holding a pipe binding
// query, with JXSE's rules: the handler, a query ID, the querier, a hop
// count of at most 2, and a PipeResolver query naming a pipe.
func parsePBPQuery(b []byte) (pbpQuery, error) {
	var pq pbpQuery
	q, err := parseDoc(b, "ResolverQuery")
	if err != nil {
		return pq, err
	}
	if h := childText(q, "HandlerName"); h != jxtaPipeHandler {
		return pq, fmt.Errorf("handler %q", h)
	}
	qid, err := strconv.ParseInt(childText(q, "QueryID"), 10, 32)
	if err != nil {
		return pq, fmt.Errorf("query ID: %w", err)
	}
	pq.qid = int32(qid)
	if hc, err := strconv.Atoi(childText(q, "HC")); err == nil && hc > 2 {
		return pq, fmt.Errorf("hop count %d", hc)
	}
	if pq.src, err = id.Parse(childText(q, "SrcPeerID")); err != nil || pq.src.Kind() != id.KindPeer {
		return pq, fmt.Errorf("querier %q", childText(q, "SrcPeerID"))
	}
	pbp, err := parseDoc([]byte(childText(q, "Query")), "PipeResolver")
	if err != nil {
		return pq, err
	}
	if childText(pbp, "MsgType") != "Query" {
		return pq, fmt.Errorf("not a query")
	}
	if pq.pipe, err = id.Parse(childText(pbp, "PipeId")); err != nil || pq.pipe.Kind() != id.KindPipe {
		return pq, fmt.Errorf("pipe ID %q", childText(pbp, "PipeId"))
	}
	pq.typ = childText(pbp, "Type")
	for _, p := range pbp.SelectElements("Peer") {
		pq.directed = true
		if len(pq.peers) == 64 {
			break
		}
		if pid, err := id.Parse(strings.TrimSpace(p.Text())); err == nil {
			pq.peers = append(pq.peers, pid)
		}
	}
	return pq, nil
}

// parsePBPAnswer reads a resolver response document holding a pipe
// binding answer.
func parsePBPAnswer(b []byte) (int32, pbpAnswer, error) {
	var a pbpAnswer
	resp, err := parseDoc(b, "ResolverResponse")
	if err != nil {
		return 0, a, err
	}
	if h := childText(resp, "HandlerName"); h != jxtaPipeHandler {
		return 0, a, fmt.Errorf("handler %q", h)
	}
	qid, err := strconv.ParseInt(childText(resp, "QueryID"), 10, 32)
	if err != nil {
		return 0, a, fmt.Errorf("query ID: %w", err)
	}
	pbp, err := parseDoc([]byte(childText(resp, "Response")), "PipeResolver")
	if err != nil {
		return 0, a, err
	}
	if childText(pbp, "MsgType") != "Answer" {
		return 0, a, fmt.Errorf("not an answer")
	}
	if a.pipe, err = id.Parse(childText(pbp, "PipeId")); err != nil || a.pipe.Kind() != id.KindPipe {
		return 0, a, fmt.Errorf("pipe ID %q", childText(pbp, "PipeId"))
	}
	if a.peer, err = id.Parse(childText(pbp, "Peer")); err != nil || a.peer.Kind() != id.KindPeer {
		return 0, a, fmt.Errorf("peer %q", childText(pbp, "Peer"))
	}
	a.typ, a.found = childText(pbp, "Type"), childText(pbp, "Found") == "true"
	return int32(qid), a, nil
}

// query answers a JXSE peer's pipe binding query for a pipe bound here.
func (r *jxtaResolver) query(ctx context.Context, d *endpoint.Delivery) {
	defer d.Release()
	e, ok := d.Message.Get(message.JXTANamespace, jxtaQueryParam)
	if !ok {
		return
	}
	q, err := parsePBPQuery(e.Data)
	if err != nil {
		// Queries for the resolver's other handlers (discovery, routes)
		// come here too, and are not ours to count.
		if errors.Is(err, errJXTADocBounds) {
			r.s.jxtaRefused.Add(1)
		}
		return
	}
	if q.src == r.self {
		return
	}
	if q.src != d.SourceJXTA {
		// The answer goes to the querier the query names: one that is
		// not its sender would make us answer a third peer (JXTA's
		// rendezvous forwarding of queries, which would need it, is not
		// spoken here).
		r.s.jxtaRefused.Add(1)
		return
	}
	src, pipeID, typ, directed := q.src, q.pipe, q.typ, q.directed
	forUs := false
	for _, p := range q.peers {
		forUs = forUs || p == r.self
	}
	found := r.holds(pipeID, typ)
	if directed && !forUs || !directed && !found {
		return // JXSE answers only directed queries, or what it holds
	}
	// The slot first: a query refused for want of one costs nothing more
	// (an answer is a document, with this host's addresses).
	host := d.RemoteHost
	if !r.startAnswer(host) {
		r.s.jxtaRefused.Add(1)
		return
	}
	ans := r.answer(q.qid, pipeID, typ, found)
	to := endpoint.Address{Protocol: endpoint.ProtocolJXTA, Addr: strings.TrimPrefix(src.String(), "urn:jxta:"),
		Service: JXTAResolverService, Param: jxtaResponseParam}
	// Off the reader: the answer may open a connection.
	r.s.background(30*time.Second, func(ctx context.Context) {
		defer r.endAnswer(host)
		r.s.ep.Send(ctx, to, ans)
	})
}

// startAnswer takes a slot for an answer to a querier on host, if one is
// free in all and for the host, and for a host with answers in flight
// outside the last quarter kept for first answers.
func (r *jxtaResolver) startAnswer(host netip.Prefix) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.hostAnswers[host]
	if n >= maxJXTAAnswersPerHost || n > 0 && len(r.answering) >= maxJXTAAnswers-maxJXTAAnswersPerHost {
		return false
	}
	select {
	case r.answering <- struct{}{}:
	default:
		return false
	}
	r.hostAnswers[host]++
	return true
}

func (r *jxtaResolver) endAnswer(host netip.Prefix) {
	<-r.answering
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hostAnswers[host]--; r.hostAnswers[host] <= 0 {
		delete(r.hostAnswers, host)
	}
}

// holds reports whether a unicast pipe with that ID and type is bound
// here: an input pipe, a bidirectional pipe listener or a pipe bound for
// JXTA peers only.
func (r *jxtaResolver) holds(pipeID id.ID, typ string) bool {
	if typ != string(adv.Unicast) {
		return false
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.s.jxtaPipes[pipeID.String()] {
		return true
	}
	if l := r.s.servers[Key(pipeID)]; l != nil && l.adv.Type == adv.Unicast {
		return true // a bidirectional pipe listener takes JxtaBiDiPipe opens
	}
	p := r.s.inputs[Key(pipeID)]
	return p != nil && p.adv.Type == adv.Unicast
}

// answer builds the resolver response message.
func (r *jxtaResolver) answer(qid int32, pipeID id.ID, typ string, found bool) *message.Message {
	pdoc, pr := newDoc("PipeResolver")
	pr.CreateElement("MsgType").SetText("Answer")
	pr.CreateElement("PipeId").SetText(pipeID.String())
	pr.CreateElement("Type").SetText(typ)
	pr.CreateElement("Peer").SetText(r.self.String())
	pr.CreateElement("Found").SetText(strconv.FormatBool(found))
	if pa := r.peerAdv(); pa != "" {
		pr.CreateElement("PeerAdv").SetText(pa)
	}
	doc, rr := newDoc("ResolverResponse")
	rr.CreateElement("HandlerName").SetText(jxtaPipeHandler)
	rr.CreateElement("QueryID").SetText(strconv.Itoa(int(qid)))
	rr.CreateElement("Response").SetText(string(docBytes(pdoc)))
	return message.New(message.Element{Namespace: message.JXTANamespace, Name: jxtaResponseParam, MIME: message.XMLUTF8, Data: docBytes(doc)})
}

// peerAdv is this peer's minimal peer advertisement, with the TCP
// addresses it announces (a public address first) as the route hint.
func (r *jxtaResolver) peerAdv() string {
	addrs := r.s.ep.JXTA().AnnouncedAddrs()
	doc, pa := newDoc("PA")
	pa.CreateAttr("xml:space", "preserve")
	pa.CreateElement("PID").SetText(r.self.String())
	pa.CreateElement("GID").SetText(id.NetPeerGroupID.String())
	pa.CreateElement("Name").SetText("p2pmsg")
	svc := pa.CreateElement("Svc")
	svc.CreateElement("MCID").SetText("urn:jxta:uuid-DEADBEEFDEAFBABAFEEDBABE0000000805")
	ra := svc.CreateElement("Parm").CreateElement("jxta:RA")
	ra.CreateAttr("xmlns:jxta", "http://jxta.org")
	ra.CreateAttr("xml:space", "preserve")
	ra.CreateElement("DstPID").SetText(r.self.String())
	apa := ra.CreateElement("Dst").CreateElement("jxta:APA")
	apa.CreateAttr("xmlns:jxta", "http://jxta.org")
	apa.CreateAttr("xml:space", "preserve")
	for _, a := range addrs {
		apa.CreateElement("EA").SetText(a)
	}
	return string(docBytes(doc))
}

// response takes a JXSE peer's answer to one of our queries.
func (r *jxtaResolver) response(_ context.Context, d *endpoint.Delivery) {
	defer d.Release()
	e, ok := d.Message.Get(message.JXTANamespace, jxtaResponseParam)
	if !ok {
		return
	}
	qid, a, err := parsePBPAnswer(e.Data)
	if err != nil {
		return
	}
	// The answer must come from the peer it names, as far as the
	// transport knows who sent it.
	if d.SourceJXTA != a.peer {
		r.s.unproven.Add(1)
		return
	}
	r.mu.Lock()
	ch := r.pending[qid]
	r.mu.Unlock()
	if ch != nil {
		select {
		case ch <- a:
		default:
		}
	}
}

// resolve asks the JXTA peers at addrs (tcp://host:port or
// jxta://cbid-…) for the pipe's binding, as a JXSE output pipe does, and
// returns the endpoint address of the first peer that has it bound.
func (r *jxtaResolver) resolve(ctx context.Context, a *adv.PipeAdvertisement, addrs []string) (endpoint.Address, error) {
	// A random query ID: an answer counts only for a pending query, so a
	// peer that was not asked, and cannot guess the ID, cannot answer
	// (with IDs counted up, one that sent answers for the next few won
	// resolutions it was never part of).
	ch := make(chan pbpAnswer, len(addrs))
	r.mu.Lock()
	var qid int32
	for qid == 0 || r.pending[qid] != nil {
		qid = int32(rand.Uint32() >> 1) // seeded by the OS: unpredictable
	}
	r.pending[qid] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, qid)
		r.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, r.s.opts.resolveTimeout)
	defer cancel()
	q := r.queryMessage(qid, a)
	var lastErr error
	// ask sends the query to every address and reports whether it reached
	// any: when none (each refused the connection, or had no route), none
	// can answer, and the resolution ends at once, as a libp2p one whose
	// given peers cannot be dialled does.
	ask := func() (sent bool) {
		for _, addr := range addrs {
			to, err := endpoint.ParseAddress(addr)
			if err != nil {
				lastErr = err
				continue
			}
			to.Service, to.Param = JXTAResolverService, jxtaQueryParam
			if err := r.s.ep.Send(ctx, to, q); err != nil {
				lastErr = err
			} else {
				sent = true
			}
		}
		return sent
	}
	// JXSE's output pipe asks again every few seconds; so do we, in case
	// a connection was still being set up.
	again := time.NewTicker(3 * time.Second)
	defer again.Stop()
	for asked := ask(); ; {
		if !asked && ctx.Err() == nil {
			return endpoint.Address{}, fmt.Errorf("%w: pipe %s among JXTA peers %v (none could be asked): %w", ErrNotResolved, a.ID, addrs, lastErr)
		}
		select {
		case ans := <-ch:
			if ans.found && ans.pipe == a.ID && ans.typ == string(a.Type) {
				return endpoint.Address{Protocol: endpoint.ProtocolJXTA, Addr: strings.TrimPrefix(ans.peer.String(), "urn:jxta:"),
					Service: JXTAPipeService, Param: a.ID.String()}, nil
			}
		case <-again.C:
			asked = ask()
		case <-ctx.Done():
			if lastErr != nil {
				return endpoint.Address{}, fmt.Errorf("%w: pipe %s among JXTA peers %v: %w", ErrNotResolved, a.ID, addrs, lastErr)
			}
			return endpoint.Address{}, fmt.Errorf("%w: pipe %s among JXTA peers %v", ErrNotResolved, a.ID, addrs)
		}
	}
}

// queryMessage is the resolver query for a's binding.
func (r *jxtaResolver) queryMessage(qid int32, a *adv.PipeAdvertisement) *message.Message {
	pdoc, pr := newDoc("PipeResolver")
	pr.CreateElement("MsgType").SetText("Query")
	pr.CreateElement("PipeId").SetText(a.ID.String())
	pr.CreateElement("Type").SetText(string(a.Type))
	doc, rq := newDoc("ResolverQuery")
	rq.CreateElement("HandlerName").SetText(jxtaPipeHandler)
	rq.CreateElement("QueryID").SetText(strconv.Itoa(int(qid)))
	rq.CreateElement("HC").SetText("0")
	rq.CreateElement("SrcPeerID").SetText(r.self.String())
	rq.CreateElement("Query").SetText(string(docBytes(pdoc)))
	return message.New(message.Element{Namespace: message.JXTANamespace, Name: jxtaQueryParam, MIME: message.XMLUTF8, Data: docBytes(doc)})
}

// ToJXTAPeers resolves the pipe among these JXTA peers (tcp://host:port
// or jxta://cbid-… addresses) with JXTA's pipe binding protocol, for a
// pipe bound on a JXSE peer. It needs an endpoint that is a JXTA peer
// (endpoint.WithJXTA); no libp2p peer is asked.
func ToJXTAPeers(addrs ...string) ResolveOption {
	return func(c *resolveConfig) error {
		for _, a := range addrs {
			ea, err := endpoint.ParseAddress(a)
			if err != nil || ea.Protocol != endpoint.ProtocolTCP && ea.Protocol != endpoint.ProtocolJXTA {
				return fmt.Errorf("%w: JXTA peer %q: want tcp://host:port or jxta://cbid-…", ErrBadOption, a)
			}
		}
		c.jxtaPeers = append(c.jxtaPeers, addrs...)
		return nil
	}
}

// JXTATargets returns the JXTA peers the options name (ToJXTAPeers), for
// layers above pipes that connect to JXTA peers their own way.
func JXTATargets(opts ...ResolveOption) ([]string, error) {
	var rc resolveConfig
	for _, o := range opts {
		if err := o(&rc); err != nil {
			return nil, err
		}
	}
	return rc.jxtaPeers, nil
}
