package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// At-least-once delivery over a unicast pipe: the sender keeps each
// message until a Flush vouches for it, and sends again, elsewhere, what
// Flush says did not arrive or may not have. Here the worker's input pipe
// closes (it leaves) between two batches: the second batch is refused
// back, and Flush says so.
func ExampleOutputPipe_Flush() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, producer, stopP := startPipes(ctx)
	defer stopP()
	workerNode, worker, stopW := startPipes(ctx)
	defer stopW()

	jobs, _ := adv.New(adv.Unicast, "jobs", "")
	in, err := worker.NewInputPipe(jobs)
	if err != nil {
		panic(err)
	}
	out, err := producer.NewOutputPipe(ctx, jobs, pipe.ToPeers(workerNode.AddrInfo()))
	if err != nil {
		panic(err)
	}
	defer out.Close()

	// send sends a batch and returns what must be sent again.
	send := func(batch ...string) []string {
		for _, job := range batch {
			if err := out.Send(ctx, message.New(message.Text("", "job", job))); err != nil {
				// This one not sent (errors.Is(err, pipe.ErrPeerGone):
				// the worker went away), nor those after it, and the
				// earlier ones may or may not have arrived: the whole
				// batch goes again.
				return batch
			}
		}
		err := out.Flush(ctx)
		var undelivered *pipe.UndeliveredError
		switch {
		case err == nil:
			fmt.Println("delivered:", batch)
			return nil
		case errors.As(err, &undelivered):
			// The worker refused them (its pipe closed): Count says
			// how many, not which, so the batch goes again.
			fmt.Println("refused:", undelivered.Count, "of", batch)
		case errors.Is(err, endpoint.ErrMaybeLost):
			// A stream under them was reset (*endpoint.LostError):
			// some may have arrived, so sending again may duplicate.
			fmt.Println("may be lost:", batch)
		default: // ctx ended, the peer's service closed...: unknown
			fmt.Println("unknown:", batch)
		}
		return batch
	}

	send("job 1", "job 2")
	in.Close() // the worker leaves
	again := send("job 3")
	fmt.Println("to send elsewhere:", again)
	// Output:
	// delivered: [job 1 job 2]
	// refused: 1 of [job 3]
	// to send elsewhere: [job 3]
}
