package lab

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// RateNATS is the rate study's reference: what Go services pick today
// for messaging, an embedded NATS server on loopback with nats.go clients
// (plaintext, through the broker). Issue 22 set p2pmsg's rate targets
// against it; measured in the same run, the ratio to it holds on any
// machine where absolute rates do not.
const RateNATS = "nats"

// natsRig is an embedded NATS server, one publishing connection shared
// by the senders and one subscribing connection per peer, each on a
// subject of its own.
type natsRig struct {
	srv  *server.Server
	pub  *nats.Conn
	subs []*nats.Conn
	subj []string
}

func openNATSRig(peers int, sink *rateSink) (rateRig, error) {
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		MaxPayload: 16<<20 + 1<<10, // the rate study's largest size, and headroom
		MaxPending: 256 << 20,      // a whole maximum-rate run may queue: no slow-consumer cut
	})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	r := &natsRig{srv: srv}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		r.close()
		return nil, errors.New("nats server: not ready within 10 s")
	}
	connect := func() (*nats.Conn, error) {
		return nats.Connect(srv.ClientURL(), nats.NoReconnect(), nats.MaxReconnects(0))
	}
	if r.pub, err = connect(); err != nil {
		r.close()
		return nil, err
	}
	for i := range peers {
		nc, err := connect()
		if err != nil {
			r.close()
			return nil, err
		}
		r.subs = append(r.subs, nc)
		subj := fmt.Sprintf("lab.rate.%d", i)
		sub, err := nc.Subscribe(subj, func(m *nats.Msg) { sink.deliver(m.Data) })
		if err == nil {
			err = sub.SetPendingLimits(-1, -1) // the run bounds what is pending
		}
		if err == nil {
			err = nc.Flush() // the server has the subscription
		}
		if err != nil {
			r.close()
			return nil, err
		}
		r.subj = append(r.subj, subj)
	}
	return r, nil
}

func (r *natsRig) sender(int) (rateSend, error) { return natsSend{r}, nil }
func (r *natsRig) copies() int                  { return 1 }

func (r *natsRig) close() error {
	// Every message a run sent has arrived or been counted lost by then:
	// nothing is left to drain.
	if r.pub != nil {
		r.pub.Close()
	}
	for _, nc := range r.subs {
		nc.Close()
	}
	r.srv.Shutdown()
	r.srv.WaitForShutdown()
	return nil
}

// natsSend publishes; nats.go copies the payload into its write buffer,
// which its own flusher writes out.
type natsSend struct{ r *natsRig }

func (s natsSend) send(_ context.Context, p int, payload []byte) error {
	return s.r.pub.Publish(s.r.subj[p], payload)
}

func (natsSend) idle() error { return nil }
