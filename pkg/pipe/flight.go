package pipe

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
)

// flight is one resolution that concurrent Resolve calls for the same
// pipe, role and peers share: a burst of socket Dials (an http.Transport
// opening connections) made a resolution, and resolver streams to the
// same peers, each, which the peers' stream limits then refused (174 of
// 300 HTTP requests failed). It runs on the service's context, so that a
// caller leaving does not end it for the others; the last one to leave
// ends it.
type flight struct {
	done    chan struct{}
	p       peer.ID
	err     error
	waiters int                     // under Service.mu
	cancel  context.CancelCauseFunc // ends the resolution
}

// flightKey names what a resolution asks: the pipe, the role and the
// peers given (with their addresses, which it dials), and what of the
// advertisement it reads besides the ID, its type and binders, which say
// whose answers count (needsProof): anyone can make an advertisement of
// a pipe's ID that names no binders, and a caller whose advertisement
// names them must not take the answer of a resolution of that one.
func flightKey(a *adv.PipeAdvertisement, role string, explicit []peer.AddrInfo) string {
	var b strings.Builder
	b.WriteString(Key(a.ID) + "/" + role)
	fmt.Fprintf(&b, " %s%q", a.Type, a.Binders)
	ais := slices.Clone(explicit)
	slices.SortFunc(ais, func(x, y peer.AddrInfo) int { return strings.Compare(string(x.ID), string(y.ID)) })
	for _, ai := range ais {
		fmt.Fprintf(&b, " %s%v", ai.ID, ai.Addrs)
	}
	return b.String()
}

// resolveShared is resolve, shared with the concurrent callers asking
// the same (flight). A caller whose ctx ends leaves with ctx's cause;
// the last to leave ends the resolution and returns its failure, which
// says whom it asked.
func (s *Service) resolveShared(ctx context.Context, a *adv.PipeAdvertisement, role string, explicit []peer.AddrInfo) (peer.ID, error) {
	k := flightKey(a, role, explicit)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return "", fmt.Errorf("%w: pipe service (resolving %s)", ErrClosed, a.ID)
	}
	f := s.flights[k]
	if f == nil {
		fctx, cancel := context.WithCancelCause(s.ctx)
		f = &flight{done: make(chan struct{}), cancel: cancel}
		if s.flights == nil {
			s.flights = map[string]*flight{}
		}
		s.flights[k] = f
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			p, err := s.resolve(fctx, a, role, explicit)
			s.mu.Lock()
			if s.flights[k] == f {
				delete(s.flights, k)
			}
			f.p, f.err = p, err
			s.mu.Unlock()
			cancel(nil)
			close(f.done)
		}()
	}
	f.waiters++
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.p, f.err
	case <-ctx.Done():
	}
	s.mu.Lock()
	f.waiters--
	last := f.waiters == 0
	if last && s.flights[k] == f {
		delete(s.flights, k) // a caller coming now starts afresh
	}
	s.mu.Unlock()
	if !last {
		return "", &stoppedError{fmt.Sprintf("%v as %s", a.ID, role), context.Cause(ctx), ""}
	}
	f.cancel(context.Cause(ctx))
	<-f.done
	return f.p, f.err
}
