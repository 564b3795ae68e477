package testutil

import (
	"sync"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// SendConcurrently sends n messages from senders goroutines at once, as
// evenly as it can, each goroutine reusing one message of size bytes, and
// waits for them. send sends one message; the first error fails b.
func SendConcurrently(b testing.TB, n, senders, size int, send func(*message.Message) error) {
	var wg sync.WaitGroup
	for g := range senders {
		k := n / senders
		if g < n%senders {
			k++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := message.New(message.Element{Name: "d", Data: make([]byte, size)})
			for range k {
				if err := send(m); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
