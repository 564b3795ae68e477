package jxtarel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/jxtarel"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Two Conns joined in one process: each one's SendFunc hands its messages
// to the other's Handle, as a pipe carries them between two peers.
func Example() {
	var a, b *jxtarel.Conn
	a, _ = jxtarel.New(func(_ context.Context, m *message.Message) error { b.Handle(m); return nil })
	b, _ = jxtarel.New(func(_ context.Context, m *message.Message) error { a.Handle(m); return nil })
	defer a.Close()
	defer b.Close()
	ctx := context.Background()

	for _, s := range []string{"hello", "world"} {
		_ = a.Send(ctx, []byte(s))
	}
	for range 2 {
		p, _ := b.Receive(ctx)
		fmt.Println(string(p))
	}
	// b acknowledged what it took: nothing is left to send again.
	fmt.Println(a.Drain(ctx), a.Pending())

	// a's end, as the pipe above learns it (JXSE's close message).
	b.SetEOF(io.EOF)
	_, err := b.Receive(ctx)
	fmt.Println(err)
	// Output:
	// hello
	// world
	// <nil> 0
	// EOF
}

// A reader that stops reading stops the sender: a block is acknowledged
// only once the application has taken it, and Send waits while the window
// is full.
func ExampleWithWindow() {
	var a, b *jxtarel.Conn
	a, _ = jxtarel.New(func(_ context.Context, m *message.Message) error { b.Handle(m); return nil },
		jxtarel.WithWindow(1, 64<<10))
	b, _ = jxtarel.New(func(_ context.Context, m *message.Message) error { a.Handle(m); return nil })
	defer a.Close()
	defer b.Close()
	ctx := context.Background()

	fmt.Println(a.Send(ctx, []byte("one")))
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err := a.Send(short, []byte("two")) // b has not taken "one"
	cancel()
	fmt.Println(errors.Is(err, context.DeadlineExceeded), a.Pending())

	p, _ := b.Receive(ctx)
	fmt.Println(string(p), a.Send(ctx, []byte("two")))
	p, _ = b.Receive(ctx)
	fmt.Println(string(p))
	// Output:
	// <nil>
	// true 1
	// one <nil>
	// two
}

// An acknowledgement's data: the highest block received in order, then
// blocks received above it (selective acknowledgements).
func ExampleParseAck() {
	data := jxtarel.AppendAck(nil, 3, []int32{5, 2, 6}) // 2 says nothing: 3 covers it
	fmt.Printf("% x\n", data)
	cum, sacks, err := jxtarel.ParseAck(data)
	fmt.Println(cum, sacks, err)
	_, _, err = jxtarel.ParseAck(data[:5])
	fmt.Println(errors.Is(err, jxtarel.ErrMalformed))
	// Output:
	// 00 00 00 03 00 00 00 05 00 00 00 02 00 00 00 06
	// 3 [5 6] <nil>
	// true
}
