package jxtarel_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/jxtarel"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// FuzzParseAck: an acknowledgement a peer sends is refused with
// ErrMalformed or read within the bounds, and what is read, written
// again by AppendAck, reads back the same.
func FuzzParseAck(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3})
	f.Add(jxtarel.AppendAck(nil, 3, []int32{5, 7, 9}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		cum, sacks, err := jxtarel.ParseAck(b)
		if err != nil {
			if !errors.Is(err, jxtarel.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if cum < 0 || len(sacks) > 1024 {
			t.Fatalf("cum %d, %d sacks", cum, len(sacks))
		}
		for _, s := range sacks {
			if s <= cum {
				t.Fatalf("sack %d at or below %d", s, cum)
			}
		}
		cum2, sacks2, err := jxtarel.ParseAck(jxtarel.AppendAck(nil, cum, sacks))
		if err != nil || cum2 != cum || !slices.Equal(sacks2, sacks) {
			t.Fatalf("ack %d %v written again read back as %d %v, %v", cum, sacks, cum2, sacks2, err)
		}
	})
}

// FuzzHandle feeds a receiving Conn element names and data as a hostile
// peer would send them, the second after the peer's end: nothing panics,
// what is buffered stays within the receive buffer, and Receive ends.
func FuzzHandle(f *testing.F) {
	f.Add("1", []byte("data"), "ack", []byte{0, 0, 0, 1})
	f.Add("2147483647", []byte("x"), "retry", []byte("RETRY"))
	f.Add("-1", []byte{}, "ack", []byte{0, 0, 0, 9, 0, 0, 0, 10})
	f.Fuzz(func(t *testing.T, name1 string, data1 []byte, name2 string, data2 []byte) {
		c, err := jxtarel.New(func(context.Context, *message.Message) error { return nil }, jxtarel.WithReceiveBuffer(4, 64))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Handle(message.New(
			message.Element{Namespace: jxtarel.Namespace, Name: name1, MIME: jxtarel.BlockMIME, Data: data1},
			message.Element{Namespace: jxtarel.Namespace, Name: name2, MIME: jxtarel.AckMIME, Data: data2},
		))
		c.SetEOF(io.EOF)
		c.Handle(message.New(message.Element{Namespace: jxtarel.Namespace, Name: name1, MIME: jxtarel.BlockMIME, Data: data2}))
		st := c.Stats()
		if st.BlocksReceived > 3 {
			t.Fatalf("stats %+v", st)
		}
		// After the end, Receive returns what came in order, then the
		// end, or ErrIncomplete when a block was missing before others.
		for range 4 {
			if _, err = c.Receive(context.Background()); err != nil {
				break
			}
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, jxtarel.ErrIncomplete) {
			t.Fatalf("Receive after the end: %v", err)
		}
	})
}
