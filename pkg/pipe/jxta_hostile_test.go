package pipe_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// A peer that was never asked sends "found, here" answers for the query
// IDs it guesses while a resolution asks only H: it never wins (with
// query IDs counted up from 1 it won 1 to 4 of every 10).
func TestJXTAUnaskedPeerCannotAnswer(t *testing.T) {
	hs, hIdent := jxtaPipes(t)
	a := seededAdv(t, "unasked-answer")
	unbind, err := hs.ListenJXTA(a, func(*pipe.Received) {})
	if err != nil {
		t.Fatal(err)
	}
	defer unbind()
	hAddr := hs.Endpoint().JXTA().Addrs()[0]
	as, _ := jxtaPipes(t)
	aAddr := as.Endpoint().JXTA().Addrs()[0]

	zIdent, _ := jxtatcp.NewIdentity()
	z, err := jxtatcp.New(zIdent, func(*jxtatcp.Incoming) {})
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	answer := func(qid int) *message.Message {
		pr := "<?xml version=\"1.0\"?><jxta:PipeResolver xmlns:jxta=\"http://jxta.org\"><MsgType>Answer</MsgType><PipeId>" + a.ID.String() +
			"</PipeId><Type>JxtaUnicast</Type><Peer>" + zIdent.ID().String() + "</Peer><Found>true</Found></jxta:PipeResolver>"
		pr = strings.NewReplacer("&", "&amp;", "<", "&lt;").Replace(pr)
		doc := "<?xml version=\"1.0\"?><jxta:ResolverResponse xmlns:jxta=\"http://jxta.org\"><HandlerName>JxtaPipeResolver</HandlerName><QueryID>" +
			strconv.Itoa(qid) + "</QueryID><Response>" + pr + "</Response></jxta:ResolverResponse>"
		return message.New(message.Element{Namespace: "jxta", Name: "jxta-NetGroupIRes", MIME: message.XMLUTF8, Data: []byte(doc)})
	}
	const rounds = 10
	zctx, stop := context.WithCancel(context.Background())
	defer stop()
	var sent atomic.Int64
	go func() {
		for zctx.Err() == nil {
			for qid := 1; qid <= rounds+2; qid++ {
				if z.Send(zctx, aAddr, pipe.JXTAResolverService, "jxta-NetGroupIRes", answer(qid)) == nil {
					sent.Add(1)
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	hijacked := 0
	for range rounds {
		p, err := as.ResolveJXTA(ctx(t), a, hAddr)
		if err != nil {
			t.Fatal(err)
		}
		if p != hIdent.ID() {
			hijacked++
		}
	}
	stop()
	t.Logf("Z sent %d answers; %d of %d resolutions among [H] resolved to Z", sent.Load(), hijacked, rounds)
	if hijacked > 0 {
		t.Fatalf("%d of %d resolutions asking only H were answered by Z, a peer never asked", hijacked, rounds)
	}
}
