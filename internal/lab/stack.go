package lab

import (
	"context"
	"errors"
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// stack is two connected p2pmsg nodes with endpoint services and, once a
// layer asks for them, pipe services: what the endpoint, pipe and socket
// layers run on. RunRTT runs all of those layers on one stack, so that
// they differ only by the layer (see RunRTT).
type stack struct {
	na, nb *node.Node
	ea, eb *endpoint.Service
	pa, pb *pipe.Service
}

func openStack(ctx context.Context, transport string) (*stack, error) {
	s := &stack{}
	var err error
	if s.na, err = NewNode(ctx, transport); err != nil {
		return nil, err
	}
	if s.nb, err = NewNode(ctx, transport); err != nil {
		s.Close()
		return nil, err
	}
	if err = s.na.Connect(ctx, s.nb.AddrInfo()); err != nil {
		s.Close()
		return nil, err
	}
	if s.ea, err = endpoint.New(s.na); err == nil {
		s.eb, err = endpoint.New(s.nb)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// pipes starts the pipe services, once.
func (s *stack) pipes() error {
	if s.pa != nil {
		return nil
	}
	pa, err := pipe.New(s.ea)
	if err != nil {
		return err
	}
	pb, err := pipe.New(s.eb)
	if err != nil {
		pa.Close()
		return err
	}
	s.pa, s.pb = pa, pb
	return nil
}

func (s *stack) Close() error {
	var errs []error
	for _, p := range []*pipe.Service{s.pa, s.pb} {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	for _, e := range []*endpoint.Service{s.ea, s.eb} {
		if e != nil {
			errs = append(errs, e.Close())
		}
	}
	for _, n := range []*node.Node{s.na, s.nb} {
		if n != nil {
			errs = append(errs, n.Close())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab: closing nodes: %w", err)
	}
	return nil
}

// stackLayer is a Layer whose pairs can share a stack with other layers'
// pairs. Closing such a pair releases what it set up on the stack and
// leaves the stack up.
type stackLayer interface {
	Layer
	openOn(ctx context.Context, s *stack) (Pair, error)
}

// openOwn opens l's pair on a stack of its own, which closing the pair
// closes too: what Open does for a stackLayer.
func openOwn(ctx context.Context, transport string, l stackLayer) (Pair, error) {
	s, err := openStack(ctx, transport)
	if err != nil {
		return nil, fmt.Errorf("lab: %s layer: %w", l.Name(), err)
	}
	p, err := l.openOn(ctx, s)
	if err != nil {
		s.Close()
		return nil, err
	}
	return ownStack{p, s}, nil
}

// ownStack is a pair with the stack it alone runs on.
type ownStack struct {
	Pair
	s *stack
}

// RoundTrips implements Batcher for pairs that do, and loops for others.
func (o ownStack) RoundTrips(ctx context.Context, payload []byte, n int) error {
	return roundTrips(ctx, o.Pair, payload, n)
}

func (o ownStack) Close() error {
	return errors.Join(o.Pair.Close(), o.s.Close())
}
